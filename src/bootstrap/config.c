/*
 * config.c - the one table of communicator settings: name, environment
 * variable, default, unit, doc and parser. Flags, RING_* variables, --help
 * and --print-config all read it.
 */
#include "ring_build.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringd/config.h>

#include "errors.h"
#include "log.h"
#include "opt_table.h"
#include "suggest.h"
#include "parse.h"
#include "verbs_hca.h"
#include "autotune_space.h"
#include "iface.h"
#include "peers.h"
#include "rdzv_record.h"

#define FIELD(_f) offsetof(ring_config_t, _f), sizeof(((ring_config_t *)0)->_f)

static const ring_opt_t config_table[] = {
    {"rank", "RING_RANK", RING_OPT_INT, "-1", "", FIELD(rank), -1, INT_MAX,
     "this peer's rank in 0..world-size-1 (required in a ring of 2 or more; launchers set it: "
     "ring-launch, srun, mpirun, torchrun's RANK)"},
    {"world-size", "RING_WORLD_SIZE", RING_OPT_INT, "0", "", FIELD(world_size), 0, 65536,
     "number of peers in the ring (required, or a launcher's; ringd without any trains alone)"},
    {"peers", "RING_PEERS", RING_OPT_CUSTOM, "", "host[:port],...", FIELD(peers), 0, 0,
     "address of every peer, in rank order; IPv6 as [addr]:port; a missing port is taken "
     "from --port"},
    {"transport", "RING_TRANSPORT", RING_OPT_CHOICE, "auto", "auto|tcp|shm|verbs",
     FIELD(transport), 0, 0,
     "how peers exchange data: verbs (RDMA: InfiniBand or RoCE), tcp, or shm (shared memory "
     "between peers on one host, tcp to the others); auto = verbs when this build has it and "
     "an active RDMA port exists, unless every peer is on this host (a loopback rendezvous or "
     "peer list), else shm, or tcp under --rate-limit (saying why, once); under auto, peers "
     "on one host meet in shared memory also where the others run verbs"},
    {"ib-dev", "RING_IB_HCA", RING_OPT_STRING, "", "NAME[:PORT],...", FIELD(ib_dev), 0, 0,
     "verbs: the RDMA devices to use, as NCCL_IB_HCA: names are prefixes, '=' first for "
     "exact names, '^' first to exclude; rank r takes the (r mod k)-th of the k active "
     "ports that match; empty = every device"},
    {"gid-index", "RING_IB_GID_INDEX", RING_OPT_INT, "-1", "", FIELD(gid_index), -1, 255,
     "verbs on RoCE: the GID table index; -1 = the first RoCE v2 GID holding an IPv4 "
     "address"},
    {"ib-timeout", "RING_IB_TIMEOUT", RING_OPT_INT, "18", "", FIELD(ib_timeout), 1, 31,
     "verbs: QP ACK timeout, 4.096 us x 2^N per try (18 = 1.07 s; shorter ones retransmit "
     "spuriously on a loaded host, and Soft-RoCE mishandles some retransmitted writes)"},
    {"ib-retry-count", "RING_IB_RETRY_CNT", RING_OPT_INT, "7", "", FIELD(ib_retry_count), 0, 7,
     "verbs: retransmissions of an unacknowledged write before it fails naming the peer"},
    {"rendezvous", "RING_RENDEZVOUS", RING_OPT_STRING, "", "tcp://HOST:PORT|file:///DIR",
     FIELD(rendezvous), 0, 0,
     "how peers find each other instead of --peers: tcp://HOST:PORT = rank 0 serves a small "
     "store on PORT of HOST (its own host), file:///DIR = files in a directory every peer "
     "shares; a launcher's MASTER_ADDR or Slurm node list sets it (see --print-env)"},
    {"ring-order", "RING_RING_ORDER", RING_OPT_CHOICE, "host", "host|rank", FIELD(ring_order), 0,
     0, "order of the ring: host = the peers of one host next to each other (the ring crosses "
        "each host boundary once), in rank order within a host; rank = rank order"},
    {"host-id", "RING_HOST_ID", RING_OPT_STRING, "", "NAME", FIELD(host_id), 0, 0,
     "at a rendezvous: the name --ring-order host groups this peer by, instead of its host "
     "name (as NCCL_HOSTID); on Kubernetes, the node's name (spec.nodeName) puts pods of one "
     "node next to each other; peers of different ids never share memory; empty = the host "
     "name"},
    {"iface", "RING_SOCKET_IFNAME", RING_OPT_STRING, "", "IFACE,...", FIELD(iface), 0, 0,
     "tcp: interfaces whose addresses peers publish at a rendezvous, as NCCL_SOCKET_IFNAME: "
     "name prefixes, '=' first for exact names, '^' first to exclude; empty = every interface "
     "but lo and docker*, or lo when every peer is on one host"},
    {"autotune", "RING_AUTOTUNE", RING_OPT_CHOICE, "off", "off|on", FIELD(autotune), 0, 0,
     "at start-up, time allreduces of --autotune-bytes with every chunk size of "
     "--autotune-chunks and channel count of --autotune-channels on the real ring, and keep "
     "the fastest (rank 0's timing decides; the choice is logged); --chunk-size and "
     "--channels are then ignored"},
    {"autotune-chunks", "RING_AUTOTUNE_CHUNKS", RING_OPT_STRING, "64K,256K,1M", "SIZE,...",
     FIELD(autotune_chunks), 0, 0, "autotune: the chunk sizes to try (4K..64M)"},
    {"autotune-channels", "RING_AUTOTUNE_CHANNELS", RING_OPT_STRING, "1,2,4", "N,...",
     FIELD(autotune_channels), 0, 0,
     "autotune: the channel counts to try; the ring connects the largest"},
    {"autotune-bytes", "RING_AUTOTUNE_BYTES", RING_OPT_SIZE, "16M", "bytes", FIELD(autotune_bytes),
     0, 0, "autotune: the buffer of each timed allreduce (1 warm-up + 3 timed per candidate)"},
    {"codec", "RING_CODEC", RING_OPT_CHOICE, "none", "none|fp16|bf16|auto", FIELD(codec), 0, 0,
     "what a gradient travels as: fp32 (none), or fp16/bf16 with fp32 accumulation; auto: "
     "at open, time 4 MiB allreduces as fp32 and as fp16 on this ring and keep the faster "
     "(fp16 across a network, fp32 where the conversions cost more than the bytes they save, "
     "as over shared memory on one host; rank 0's times decide, logged at info)"},
    {"lz4", "RING_LZ4", RING_OPT_CHOICE, "off", "off|on|auto", FIELD(lz4), 0, 0,
     "compress each encoded chunk with lz4 (sent raw when it does not shrink); auto stops "
     "trying on a tensor whose chunks do not shrink and retries now and then"},
    {"progress-thread", "RING_PROGRESS_THREAD", RING_OPT_CHOICE, "off", "off|on",
     FIELD(progress_thread), 0, 0,
     "a thread inside libringd advances started requests while the caller computes (the "
     "Python package turns it on); every call then takes the communicator's lock"},
    {"elastic", "RING_ELASTIC", RING_OPT_CHOICE, "off", "off|on", FIELD(elastic), 0, 0,
     "the ring may change: the rendezvous store stays up, and a peer started later with the "
     "same rendezvous joins the running ring at its next ring_comm_grow (ringd/elastic.h)"},
    {"hierarchical", "RING_HIERARCHICAL", RING_OPT_CHOICE, "auto", "auto|on|off",
     FIELD(hierarchical), 0, 0,
     "hierarchical allreduce for several peers per host on several hosts: the peers of a host "
     "reduce-scatter (over shm), each allreduces its slice with one peer per other host, the "
     "host allgathers; auto = when >= 2 hosts run the same number >= 2 of peers each"},
    {"hier-min-bytes", "RING_HIER_MIN_BYTES", RING_OPT_SIZE, "1M", "bytes",
     FIELD(hier_min_bytes), 0, 0,
     "hierarchical: allreduces smaller than this stay on the flat ring"},
    {"algo", "RING_ALGO", RING_OPT_CHOICE, "auto", "auto|ring|rd|direct", FIELD(algo), 0, 0,
     "the allreduce algorithm: ring (2(N-1) steps, each moving 1/N of the buffer), rd = "
     "recursive doubling over pairs of peers (log2 N steps moving the whole buffer, plus 2 "
     "when N is not a power of two: latency-bound small buffers), direct = every peer on one "
     "host over shm puts its buffer in one shared segment and adds the others' from it (one "
     "step for buffers up to --rd-max-bytes x 2/N^2 (1/16 of it at N = 2); larger ones in "
     "pieces of up to 4 MiB, each peer adding a 1/N slice of all N inputs in one pass: two "
     "steps a piece), auto = when every "
     "peer is on this host over shm, direct for fp32 allreduces without a codec; otherwise rd "
     "for those of at most --rd-max-bytes, Rabenseifner's algorithm for those of at most "
     "--rh-max-bytes (N a power of two >= 4); the ring for the rest"},
    {"rd-max-bytes", "RING_RD_MAX_BYTES", RING_OPT_SIZE, "32K", "bytes", FIELD(rd_max_bytes), 0,
     0, "the largest allreduce the small-message algorithms take (rd; direct's one-step "
     "form; --algo rd takes every size); with --rd-fit on (or auto and --autotune on), rd's "
     "limit is measured at start-up"},
    {"rh-max-bytes", "RING_RH_MAX_BYTES", RING_OPT_SIZE, "4M", "bytes", FIELD(rh_max_bytes), 0,
     0, "with --algo auto on N a power of two of at least 4 peers (not all on one host over "
     "shm: direct runs those): fp32 allreduces without a codec larger than --rd-max-bytes and "
     "at most this run Rabenseifner's algorithm over rd's pairs (a reduce-scatter by recursive "
     "halving, then an allgather by recursive doubling: the ring's bytes in 2 log2 N steps "
     "instead of 2(N-1)); 0: never; with --rd-fit on (or auto and --autotune on), the limit "
     "is measured at start-up"},
    /* on a 2-core VM over tcp at N = 4, 4 MiB busbw in 8 interleaved rounds: 1.30-1.50
     * GB/s in 1 MiB pieces against 1.04-1.17 whole (512 KiB 0.95-1.41, 256 KiB 0.74-1.14) */
    {"rh-piece-bytes", "RING_RH_PIECE_BYTES", RING_OPT_SIZE, "1M", "bytes",
     FIELD(rh_piece_bytes), 0, 0,
     "Rabenseifner's algorithm runs an allreduce larger than this in pieces of this size "
     "(rounded down to a multiple of 4 x P2 bytes, P2 the largest power of two <= N), one "
     "after the other, each the whole schedule: a piece's halves stay small enough for the "
     "caches and the sockets' buffers; 0: the whole buffer at once"},
    /* auto by default, which is off unless --autotune is on: a fit costs up to
     * 0.4 s at every open, and on a loaded 2-core VM its times move 10-30 %
     * between runs, where the fixed limits come from interleaved runs */
    {"rd-fit", "RING_RD_FIT", RING_OPT_CHOICE, "auto", "off|on|auto", FIELD(rd_fit), 0, 0,
     "with --algo auto, when rd runs (not direct): at start-up time rd against what takes "
     "those sizes without it (Rabenseifner's algorithm where it runs, else the ring) at "
     "2, 4, 8 and 16 times --rd-max-bytes, then, where Rabenseifner's algorithm runs, it "
     "against the ring at 4, 16, 64 and 256 times rd's limit (up to 4 MiB), each until it "
     "loses by 25 % or its budget is spent, and let each take allreduces up to the size whose "
     "summed gain over its challenger (log of the time ratio) is largest: one noisy size does "
     "not decide (rank 0's times, for every peer; logged at info; at most about 0.1 + 0.3 s); "
     "off: rd takes exactly up to --rd-max-bytes, Rabenseifner's up to --rh-max-bytes; auto: "
     "on with --autotune on (the autotuner measures the algorithms' limits too), else off"},
    {"error-feedback", "RING_ERROR_FEEDBACK", RING_OPT_CHOICE, "off", "off|on",
     FIELD(error_feedback), 0, 0,
     "keep what this peer's encoding lost and add it to its next contribution to the same "
     "tensor id (fp16/bf16 only)"},
    {"fp16-scaling", "RING_FP16_SCALING", RING_OPT_CHOICE, "on", "on|off", FIELD(fp16_scaling), 0,
     0, "scale every fp16 chunk by a power of two (2^-100..2^100) chosen from its largest value, "
        "so sums up to 8.3e34 do not overflow (beyond: RING_ERR_NONFINITE) and sums down to "
        "4.8e-35 keep fp16's precision; below, only steps of 4.7e-38 remain, and fp32 "
        "subnormals come out 0 (docs/codec.md; entries far below their chunk's largest "
        "still lose digits)"},
    {"chunk-size", "RING_CHUNK_SIZE", RING_OPT_SIZE, "256K", "bytes", FIELD(chunk_bytes), 0, 0,
     "bytes per chunk on the wire; chunks of a segment are pipelined"},
    {"channels", "RING_CHANNELS", RING_OPT_INT, "1", "", FIELD(channels), 1, 16,
     "independent rings over disjoint parts of each buffer, each with its own connections"},
    {"tcp-streams", "RING_TCP_STREAMS", RING_OPT_INT, "1", "", FIELD(tcp_streams), 1, 16,
     "TCP connections per neighbour and channel; chunks are spread over them"},
    /* 0: measured at n=4 over loopback, 16-256 MiB allreduces ran 1.1-1.2x faster
     * with autotuned buffers than with 4M ones (the data stays in cache) */
    {"tcp-sockbuf", "RING_TCP_SOCKBUF", RING_OPT_SIZE, "0", "bytes", FIELD(tcp_sockbuf), 0, 0,
     "socket send/receive buffer size; 0 (the default) leaves it to the kernel's autotuning, "
     "which grows a connection's buffers as far as net.ipv4.tcp_wmem and tcp_rmem allow"},
    {"timeout", "RING_TIMEOUT", RING_OPT_DURATION, "30s", "seconds", FIELD(timeout_s), 0, 0,
     "longest wait without progress during an allreduce before failing"},
    {"connect-timeout", "RING_CONNECT_TIMEOUT", RING_OPT_DURATION, "120s", "seconds",
     FIELD(connect_timeout_s), 0, 0, "longest wait for the neighbours at start-up"},
    {"spin-us", "RING_SPIN_US", RING_OPT_INT, "1000", "microseconds", FIELD(spin_us), 0, 1000000,
     "busy-poll (yielding the CPU) this long before sleeping in poll(); 0 never spins"},
    {"port", "RING_PORT", RING_OPT_CUSTOM, "29500", "PORT|LO-HI", FIELD(port_lo), 0, 0,
     "port for peers entries without one: the k-th peer on a host gets LO+k, within LO-HI"},
    {"bind", "RING_BIND", RING_OPT_STRING, "", "ADDR|IFACE", FIELD(bind), 0, 0,
     "listen on this address or interface; default: the host of this rank's peers entry"},
    {"job-id", "RING_JOB_ID", RING_OPT_STRING, "0", "text", FIELD(job_id), 0, 0,
     "peers of one job must agree on it; a stranger with another id is refused"},
    {"secret-file", "RING_SECRET_FILE", RING_OPT_STRING, "", "FILE", FIELD(secret_file), 0, 0,
     "the job's secret (16 to 4096 bytes; one trailing newline is ignored): every connection "
     "starts with a handshake (TLS 1.3's PSK key schedule with X25519) in which both sides "
     "prove it for that connection, naming their ranks and its purpose, and a peer that "
     "cannot is dropped before it is told anything and named on stderr. Without a secret "
     "anyone who can reach the ports can join (ringd says so when it listens beyond "
     "loopback)"},
    {"secret", "RING_SECRET", RING_OPT_SECRET, "", "TEXT", FIELD(secret), 0, 0,
     "the job's secret as text instead of a file (prefer --secret-file: the environment of a "
     "process can be read by its user's other processes); never printed"},
    {"auth", "RING_AUTH", RING_OPT_CHOICE, "connect", "connect|frames|encrypt", FIELD(auth), 0,
     0,
     "with a secret: 'connect' proves it when each connection opens; 'frames' also puts a "
     "tag (GMAC, AES-256-GCM) on every frame and checks it before using a byte, so frames "
     "altered, replayed or injected on an established connection are refused; 'encrypt' "
     "also encrypts every data payload (AES-256-GCM), so gradients cannot be read on the "
     "way (headers, sizes and timing still show). Both cost CPU per byte: see "
     "docs/launchers.md; every peer must agree"},
    {"log-level", "RING_LOG_LEVEL", RING_OPT_CUSTOM, "none", "none|error|warn|info|debug|trace",
     FIELD(log_level), 0, 0, "library logging to stderr (RING_DEBUG=1 means debug)"},
    {"rate-limit", "RING_RATE_LIMIT", RING_OPT_RATE, "0", "RATE (e.g. 1gbit, 125mbps)",
     FIELD(rate_limit_bps), 0, 0,
     "bandwidth cap per connection, sending side; tc-style units (kbit, mbit, gbit are "
     "bits/s; kbps, mbps, gbps and a plain number are bytes/s); 0 = unlimited"},
    {"timeline", "RING_TIMELINE", RING_OPT_STRING, "", "FILE", FIELD(timeline), 0, 0,
     "write a Chrome trace-event JSON (chrome://tracing, Perfetto) of every allreduce, per "
     "ring step and phase, to FILE; {rank} in FILE is replaced by the rank (without it only "
     "rank 0 writes); ring-launch --timeline merges the ranks' files; empty = off"},
    {"timeline-max-events", "RING_TIMELINE_MAX_EVENTS", RING_OPT_INT, "100000", "",
     FIELD(timeline_max_events), 10, INT_MAX,
     "--timeline: stop recording after this many events (about 200 bytes each), ending the "
     "file with an event that says so"},
};

#define CONFIG_COUNT (sizeof(config_table) / sizeof(config_table[0]))

_Static_assert(CONFIG_COUNT <= sizeof(((ring_config_t *)0)->source), "source[] too small");
/* the engine stores a CHOICE as an int, and the sources as its own twin of the public ones */
#define INT_SIZED(_t) (sizeof(_t) == sizeof(int))
_Static_assert(INT_SIZED(ring_cfg_transport_t) && INT_SIZED(ring_cfg_codec_t) &&
               INT_SIZED(ring_cfg_lz4_t) && INT_SIZED(ring_cfg_hier_t) &&
               INT_SIZED(ring_cfg_algo_t) && INT_SIZED(ring_cfg_auth_t) &&
               INT_SIZED(ring_cfg_log_t) && INT_SIZED(ring_cfg_order_t),
               "a choice field is not an int");
_Static_assert((int)RING_SRC_DEFAULT == RING_OPT_SRC_DEFAULT &&
               (int)RING_SRC_ENV == RING_OPT_SRC_ENV && (int)RING_SRC_FLAG == RING_OPT_SRC_FLAG &&
               (int)RING_SRC_API == RING_OPT_SRC_API &&
               (int)RING_SRC_LAUNCHER == RING_OPT_SRC_LAUNCHER,
               "the sources differ from the engine's");
/* --log-level's words are log.h's levels, in order */
_Static_assert((int)RING_CFG_LOG_NONE == RING_LOG_NONE &&
               (int)RING_CFG_LOG_ERROR == RING_LOG_ERROR &&
               (int)RING_CFG_LOG_WARN == RING_LOG_WARN && (int)RING_CFG_LOG_INFO == RING_LOG_INFO &&
               (int)RING_CFG_LOG_DEBUG == RING_LOG_DEBUG &&
               (int)RING_CFG_LOG_TRACE == RING_LOG_TRACE,
               "the log levels differ from log.h's");

static int config_custom_parse(void *settings, const ring_opt_t *e, const char *value,
                               char *why, size_t len);
static void config_custom_format(const void *settings, const ring_opt_t *e, char *buf,
                                 size_t len);

static const ring_opt_table_t config_opts = {config_table, CONFIG_COUNT,
                                              offsetof(ring_config_t, source),
                                              config_custom_parse, config_custom_format};

static const ring_opt_t *config_find(const char *name)
{
    return ring_opt_find(&config_opts, name, strlen(name));
}

/* The engine's message, as this thread's last error. */
static ring_status_t config_apply(ring_config_t *cfg, const ring_opt_t *e, const char *value)
{
    char err[512];

    if (ring_opt_apply(&config_opts, e, cfg, value, err, sizeof(err)) != 0)
        return ring_error_set(RING_ERR_INVALID, "%s", err);
    return RING_OK;
}

static int peers_parse(void *settings, const ring_opt_t *e, const char *value, char *why,
                       size_t len)
{
    ring_config_t *cfg = settings;
    char *copy = strdup(value);

    (void)e;
    if (copy == NULL) {
        snprintf(why, len, "out of memory copying it");
        return -1;
    }
    free(cfg->peers);
    cfg->peers = copy;
    return 0;
}

static void peers_format(const void *settings, const ring_opt_t *e, char *buf, size_t len)
{
    const ring_config_t *cfg = settings;

    (void)e;
    snprintf(buf, len, "%s", cfg->peers != NULL ? cfg->peers : "");
}

static int ports_parse(void *settings, const ring_opt_t *e, const char *value, char *why,
                       size_t len)
{
    ring_config_t *cfg = settings;
    int lo, hi;

    (void)e;
    if (ring_parse_port_range(value, &lo, &hi) != 0) {
        snprintf(why, len, "not a port 1..65535 or a range LO-HI");
        return -1;
    }
    cfg->port_lo = lo;
    cfg->port_hi = hi;
    return 0;
}

static void ports_format(const void *settings, const ring_opt_t *e, char *buf, size_t len)
{
    const ring_config_t *cfg = settings;

    (void)e;
    if (cfg->port_lo == cfg->port_hi)
        snprintf(buf, len, "%d", cfg->port_lo);
    else
        snprintf(buf, len, "%d-%d", cfg->port_lo, cfg->port_hi);
}

/* log.h's words (any case, "warning", a digit 0..5), stored as the level */
static int loglevel_parse(void *settings, const ring_opt_t *e, const char *value, char *why,
                          size_t len)
{
    int level = ring_log_level_parse(value);

    (void)e;
    if (level < 0) {
        snprintf(why, len, "unknown log level");
        return -1;
    }
    ((ring_config_t *)settings)->log_level = (ring_cfg_log_t)level;
    return 0;
}

static void loglevel_format(const void *settings, const ring_opt_t *e, char *buf, size_t len)
{
    ring_opt_word(e->unit, (int)((const ring_config_t *)settings)->log_level, buf, len);
}

/* The table's three custom entries: peers (a heap string), port (a range), log-level. */
static int config_custom_parse(void *settings, const ring_opt_t *e, const char *value,
                               char *why, size_t len)
{
    if (strcmp(e->name, "peers") == 0)
        return peers_parse(settings, e, value, why, len);
    if (strcmp(e->name, "port") == 0)
        return ports_parse(settings, e, value, why, len);
    return loglevel_parse(settings, e, value, why, len);
}

static void config_custom_format(const void *settings, const ring_opt_t *e, char *buf,
                                 size_t len)
{
    if (strcmp(e->name, "peers") == 0)
        peers_format(settings, e, buf, len);
    else if (strcmp(e->name, "port") == 0)
        ports_format(settings, e, buf, len);
    else
        loglevel_format(settings, e, buf, len);
}

void ring_config_init(ring_config_t *cfg)
{
    char err[256];

    memset(cfg, 0, sizeof(*cfg));
    /* a failure here is a bug in the table: t-config checks every default */
    (void)ring_opt_defaults(&config_opts, cfg, err, sizeof(err));
}

void ring_config_free(ring_config_t *cfg)
{
    if (cfg == NULL)
        return;
    free(cfg->peers);
    cfg->peers = NULL;
}

ring_config_t *ring_config_new(void)
{
    ring_config_t *cfg = malloc(sizeof(*cfg));

    if (cfg == NULL) {
        (void)ring_error_set(RING_ERR_NO_MEMORY, "out of memory allocating a configuration");
        return NULL;
    }
    ring_config_init(cfg);
    return cfg;
}

void ring_config_delete(ring_config_t *cfg)
{
    ring_config_free(cfg);
    free(cfg);
}

ring_status_t ring_config_copy(ring_config_t *dst, const ring_config_t *src)
{
    *dst = *src;
    dst->peers = strdup(src->peers != NULL ? src->peers : "");
    if (dst->peers == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory copying the configuration");
    return RING_OK;
}

/* A name that is no setting, with the closest one when it looks like a typo. */
static ring_status_t unknown_setting(const char *name)
{
    char near[RING_SUGGEST_MAX + 2];

    if (ring_config_suggest(name, near, sizeof(near)))
        return ring_error_set(RING_ERR_UNSUPPORTED, "unknown setting '%s' (did you mean '%s'?)",
                              name, near + (near[0] == '-' ? 2 : 0));
    return ring_error_set(RING_ERR_UNSUPPORTED, "unknown setting '%s'", name);
}

ring_status_t ring_config_set(ring_config_t *cfg, const char *name, const char *value,
                              ring_config_source_t source)
{
    const ring_opt_t *e = config_find(name);

    if (e == NULL)
        return unknown_setting(name);
    RING_CHECK(config_apply(cfg, e, value));
    cfg->source[e - config_table] = (unsigned char)source;
    return RING_OK;
}

extern char **environ;

/* A launcher's value for a setting no RING_* variable gave. */
static ring_status_t config_from_launcher(ring_config_t *cfg, const char *name, const char *value)
{
    const ring_opt_t *e = config_find(name);

    if (cfg->source[e - config_table] != RING_SRC_DEFAULT || value[0] == '\0')
        return RING_OK;
    RING_CHECK(config_apply(cfg, e, value));
    cfg->source[e - config_table] = RING_SRC_LAUNCHER;
    return RING_OK;
}

static ring_status_t config_apply_launcher(ring_config_t *cfg)
{
    ring_launch_t *l = &cfg->launch;
    char num[16];

    /* RING_PORT, when set, is the store's port; else the job id picks one */
    RING_CHECK(ring_launch_detect(l, ring_config_source(cfg, "port") == RING_SRC_ENV
                                         ? cfg->port_lo : 0));
    if (l->rank >= 0) {
        snprintf(num, sizeof(num), "%d", l->rank);
        RING_CHECK(config_from_launcher(cfg, "rank", num));
    }
    if (l->world_size > 0) {
        snprintf(num, sizeof(num), "%d", l->world_size);
        RING_CHECK(config_from_launcher(cfg, "world-size", num));
    }
    RING_CHECK(config_from_launcher(cfg, "peers", l->peers));
    if (cfg->source[config_find("peers") - config_table] == RING_SRC_DEFAULT)
        RING_CHECK(config_from_launcher(cfg, "rendezvous", l->rendezvous));
    return config_from_launcher(cfg, "job-id", l->job_id);
}

ring_config_source_t ring_config_source(const ring_config_t *cfg, const char *name)
{
    const ring_opt_t *e = config_find(name);

    return e != NULL ? (ring_config_source_t)cfg->source[e - config_table] : RING_SRC_DEFAULT;
}

int ring_config_uses_rendezvous(const ring_config_t *cfg)
{
    ring_config_source_t rs = cfg->source[config_find("rendezvous") - config_table];
    ring_config_source_t ps = cfg->source[config_find("peers") - config_table];

    if (cfg->rendezvous[0] == '\0')
        return 0;
    /* a launcher's guess loses to a peer list the user gave */
    return !(rs == RING_SRC_LAUNCHER && ps != RING_SRC_DEFAULT && ps != RING_SRC_LAUNCHER);
}

ring_status_t ring_config_load_env(ring_config_t *cfg)
{
    char err[512];

    if (ring_opt_load_env(&config_opts, cfg, err, sizeof(err)) != 0)
        return ring_error_set(RING_ERR_INVALID, "%s", err);
    if (cfg->source[config_find("log-level") - config_table] == RING_SRC_DEFAULT) {
        const char *debug = getenv("RING_DEBUG");
        if (debug != NULL && *debug != '\0' && strcmp(debug, "0") != 0) {
            cfg->log_level = RING_CFG_LOG_DEBUG;
            cfg->source[config_find("log-level") - config_table] = RING_SRC_ENV;
        }
    }
    return config_apply_launcher(cfg);
}

/* Variables other parts of ringd read (RING_SHM_BYTES: transport/shm.c); not in this table, but not typos either
 * (RING_PYTHON*: tools/experiments/ring-analyze's interpreter, set around the experiment drivers). */
static const char *const known_other_env[] = {"RING_DEBUG", "RING_LOCAL_RANK", "RING_KERNEL",
                                              "RING_FAULT", "RING_TEST_SLOW", "RING_PYTHON",
                                              "RING_PYTHON_FALLBACK", "RING_SHM_BYTES",
                                              "RING_IBVERBS_LIBRARY", NULL};

int ring_config_env_known(const char *var, size_t len)
{
    if (ring_opt_env_known(&config_opts, var, len))
        return 1;
    for (size_t i = 0; known_other_env[i] != NULL; i++)
        if (strlen(known_other_env[i]) == len && strncmp(known_other_env[i], var, len) == 0)
            return 1;
    return 0;
}

int ring_config_suggest(const char *word, char *buf, size_t len)
{
    if (word == NULL || buf == NULL || len == 0)
        return 0;
    return ring_opt_closest(&config_opts, word, NULL, known_other_env, buf, len);
}

int ring_config_check_env(FILE *out)
{
    int unknown = 0;

    for (char **env = environ; env != NULL && *env != NULL; env++) {
        const char *var = *env;
        size_t len = strcspn(var, "=");

        if (strncmp(var, "RING_", 5) != 0)
            continue;
        if (!ring_config_env_known(var, len)) {
            char near[RING_SUGGEST_MAX + 2];

            unknown++;
            /* var is NAME=value: the suggestion compares the name */
            if (out != NULL && ring_config_suggest(var, near, sizeof(near)))
                fprintf(out, "warning: unknown environment variable %.*s ignored: did you mean "
                             "%s? (see --help for the RING_* variables)\n", (int)len, var, near);
            else if (out != NULL)
                fprintf(out, "warning: unknown environment variable %.*s ignored "
                             "(see --help for the RING_* variables)\n", (int)len, var);
        }
    }
    return unknown;
}

ring_status_t ring_config_parse_arg(ring_config_t *cfg, int argc, char **argv, int *i)
{
    char err[512];

    switch (ring_opt_parse_arg(&config_opts, cfg, argc, argv, i, err, sizeof(err))) {
    case 1:
        return RING_OK;
    case 0:
        return RING_ERR_UNSUPPORTED; /* not a ring setting: the caller's, or unknown */
    default:
        return ring_error_set(RING_ERR_INVALID, "%s", err);
    }
}

ring_status_t ring_config_validate(const ring_config_t *cfg)
{
    char err[512];

    /* the choices are ints a program may have written itself (config.h's enums) */
    if (ring_opt_check_choices(&config_opts, cfg, err, sizeof(err)) != 0)
        return ring_error_set(RING_ERR_INVALID, "%s: set a choice by its word with "
                              "ring_config_set, or to one of config.h's RING_CFG_* values", err);
    if ((int)cfg->log_level < RING_CFG_LOG_NONE || cfg->log_level > RING_CFG_LOG_TRACE)
        return ring_error_set(RING_ERR_INVALID, "--log-level (RING_LOG_LEVEL) holds %d, which "
                              "is none of its 6 values (none|error|warn|info|debug|trace): set "
                              "it by its word with ring_config_set, or to a RING_CFG_LOG_* value",
                              (int)cfg->log_level);
    if (cfg->world_size < 1)
        return ring_error_set(RING_ERR_INVALID,
                              "world size not set: use --world-size N or RING_WORLD_SIZE "
                              "(or start under ring-launch)");
    if (cfg->rank < 0)
        return ring_error_set(RING_ERR_INVALID,
                              "rank not set: use --rank R or RING_RANK (or start under ring-launch)");
    if (cfg->rank >= cfg->world_size)
        return ring_error_set(RING_ERR_INVALID, "rank %d is out of range for world size %d "
                              "(ranks are 0..%d)", cfg->rank, cfg->world_size, cfg->world_size - 1);
    if (cfg->chunk_bytes < 64 || cfg->chunk_bytes > (1u << 30))
        return ring_error_set(RING_ERR_INVALID, "chunk size %zu is out of range 64..1G bytes "
                              "(--chunk-size, RING_CHUNK_SIZE)", cfg->chunk_bytes);
    if (cfg->world_size == 1 && cfg->peers != NULL && strchr(cfg->peers, ',') != NULL) {
        int entries = 1;

        for (const char *c = cfg->peers; *c != '\0'; c++)
            entries += *c == ',';
        return ring_error_set(RING_ERR_INVALID, "the world size is 1 but RING_PEERS/--peers lists "
                              "%d peers: set --world-size %d (RING_WORLD_SIZE) to train with "
                              "them, or leave out --peers to train alone", entries, entries);
    }
    if (cfg->world_size > 1 && ring_config_uses_rendezvous(cfg)) {
        ring_rdzv_url_t url;
        char why[300];

        if (ring_rdzv_url_parse(cfg->rendezvous, &url, why, sizeof(why)) != 0)
            return ring_error_set(RING_ERR_INVALID, "--rendezvous / RING_RENDEZVOUS '%s': %s",
                                  cfg->rendezvous, why);
    } else if (cfg->world_size > 1) {
        ring_peer_addr_t *addrs;

        /* torchrun-style variables say who we are, not where the others are */
        if ((cfg->peers == NULL || cfg->peers[0] == '\0') &&
            (strcmp(cfg->launch.launcher, "torchrun") == 0 ||
             strcmp(cfg->launch.launcher, "kubernetes") == 0))
            return ring_error_set(RING_ERR_INVALID, "%s is set (%s) but MASTER_ADDR is not, so "
                                  "the peers have nowhere to meet: set MASTER_ADDR to rank 0's "
                                  "host and MASTER_PORT to a free port there (%s), or give "
                                  "--rendezvous tcp://HOST:PORT or RING_PEERS",
                                  cfg->launch.rank_var, cfg->launch.launcher,
                                  strcmp(cfg->launch.launcher, "torchrun") == 0
                                      ? "as torchrun does"
                                      : "as the manifest in docs/launchers.md does");
        RING_CHECK(ring_peers_parse(cfg->peers, cfg->world_size, cfg->port_lo, cfg->port_hi,
                                    &addrs));
        free(addrs);
    }
    if (cfg->host_id[0] != '\0') {
        for (const char *c = cfg->host_id; *c != '\0'; c++)
            if ((unsigned char)*c <= ' ' || *c == 0x7f)
                return ring_error_set(RING_ERR_INVALID, "--host-id / RING_HOST_ID '%s': a name "
                                      "without spaces or control characters", cfg->host_id);
        if (cfg->world_size > 1 && !ring_config_uses_rendezvous(cfg))
            return ring_error_set(RING_ERR_INVALID, "--host-id / RING_HOST_ID is exchanged at a "
                                  "rendezvous (--rendezvous, or a launcher's MASTER_ADDR); with "
                                  "--peers the ring order groups peers by their entries' hosts");
    }
    if (cfg->timeout_s <= 0 || cfg->connect_timeout_s <= 0)
        return ring_error_set(RING_ERR_INVALID, "timeouts must be positive "
                              "(--timeout %g, --connect-timeout %g)", cfg->timeout_s,
                              cfg->connect_timeout_s);
    {
        char why[300];
        if (ring_iface_spec_check(cfg->iface, why, sizeof(why)) != 0)
            return ring_error_set(RING_ERR_INVALID, "%s (--iface)", why);
    }
    if (cfg->elastic && cfg->autotune)
        return ring_error_set(RING_ERR_INVALID, "--elastic on cannot be combined with --autotune "
                              "on: a peer that joins later could not take part in what the "
                              "founders measured; give --chunk-size and --channels instead");
    if (cfg->autotune) {
        ring_autotune_space_t sp;
        char bad[300];

        if (ring_autotune_parse(cfg->autotune_chunks, cfg->autotune_channels, &sp, bad,
                                sizeof(bad)) != 0)
            return ring_error_set(RING_ERR_INVALID, "%s", bad);
        if (cfg->autotune_bytes < 4096 || cfg->autotune_bytes > (1u << 30))
            return ring_error_set(RING_ERR_INVALID, "--autotune-bytes %zu is out of range "
                                  "4K..1G", cfg->autotune_bytes);
    }
    {
        vb_hca_spec_t hca;
        char why[256];

        if (vb_hca_parse(cfg->ib_dev, &hca, why, sizeof(why)) != 0)
            return ring_error_set(RING_ERR_INVALID, "%s (RING_IB_HCA / --ib-dev)", why);
    }
    return RING_OK;
}

ring_status_t ring_config_get(const ring_config_t *cfg, const char *name, char *buf, size_t len)
{
    const ring_opt_t *e = config_find(name);
    char value[4608];

    if (e == NULL)
        return unknown_setting(name);
    ring_opt_format(&config_opts, e, cfg, value, sizeof(value));
    if (buf == NULL || strlen(value) >= len)
        return ring_error_set(RING_ERR_INVALID, "ring_config_get: the value of --%s needs %zu "
                              "bytes, the buffer has %zu", e->name, strlen(value) + 1, len);
    memcpy(buf, value, strlen(value) + 1);
    return RING_OK;
}

void ring_config_print_help(FILE *out)
{
    ring_opt_print_help(&config_opts, out);
}

void ring_config_print_help_from(const ring_config_t *cfg, FILE *out)
{
    ring_opt_print_help_with(&config_opts, cfg, out);
}

/* The launcher variable behind a setting, for --print-config. */
static const char *config_launcher_var(const void *settings, const ring_opt_t *e)
{
    const ring_config_t *cfg = settings;
    const ring_launch_t *l = &cfg->launch;

    if (cfg->source[e - config_table] != RING_SRC_LAUNCHER)
        return "";
    if (strcmp(e->name, "rank") == 0)
        return l->rank_var;
    if (strcmp(e->name, "world-size") == 0)
        return l->world_var;
    if (strcmp(e->name, "peers") == 0)
        return l->peers_var;
    if (strcmp(e->name, "rendezvous") == 0)
        return l->rendezvous_why;
    if (strcmp(e->name, "job-id") == 0)
        return l->job_var;
    return "";
}

void ring_config_print(const ring_config_t *cfg, FILE *out)
{
    ring_opt_print(&config_opts, cfg, out, config_launcher_var);
}
