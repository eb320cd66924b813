/*
 * config.c - the one table of communicator settings: name, environment
 * variable, default, unit, doc and parser. Flags, RING_* variables, --help
 * and --print-config all read it.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ringd/config.h>

#include "errors.h"
#include "log.h"
#include "parse.h"
#include "verbs_hca.h"
#include "autotune_space.h"
#include "iface.h"
#include "peers.h"
#include "rdzv_record.h"

typedef enum config_type {
    CONFIG_INT,
    CONFIG_SIZE,
    CONFIG_DURATION,
    CONFIG_STRING,    /* fixed char array inside ring_config_t */
    CONFIG_PEERS,     /* heap string */
    CONFIG_PORTS,     /* "P" or "LO-HI" */
    CONFIG_CHOICE,    /* one of the '|'-separated words of the unit string */
    CONFIG_LOGLEVEL,
    CONFIG_RATE,      /* double, bytes/s, tc-style units; 0 = unlimited */
    CONFIG_SECRET     /* like CONFIG_STRING, but never shown: "(set)" or "" */
} config_type_t;

typedef struct config_entry {
    const char *name;   /* flag without "--"; env is RING_ + upper-case name with '_' */
    const char *env;
    config_type_t type;
    const char *defval; /* as text, parsed by the same parser as user input */
    const char *unit;   /* shown in --help */
    size_t offset;
    size_t size;        /* for CONFIG_STRING */
    long min, max;      /* for CONFIG_INT */
    const char *doc;
} config_entry_t;

#define FIELD(_f) offsetof(ring_config_t, _f), sizeof(((ring_config_t *)0)->_f)

static const config_entry_t config_table[] = {
    {"rank", "RING_RANK", CONFIG_INT, "-1", "", FIELD(rank), -1, INT_MAX,
     "this peer's rank in 0..world-size-1 (required)"},
    {"world-size", "RING_WORLD_SIZE", CONFIG_INT, "0", "", FIELD(world_size), 0, 65536,
     "number of peers in the ring (required)"},
    {"peers", "RING_PEERS", CONFIG_PEERS, "", "host[:port],...", FIELD(peers), 0, 0,
     "address of every peer, in rank order; IPv6 as [addr]:port; a missing port is taken "
     "from --port"},
    {"transport", "RING_TRANSPORT", CONFIG_CHOICE, "auto", "auto|tcp|verbs", FIELD(transport),
     0, 0,
     "how peers exchange data: verbs (RDMA: InfiniBand or RoCE) or tcp; auto = verbs when "
     "this build has it and an active RDMA port exists, else tcp (saying why, once)"},
    {"ib-dev", "RING_IB_HCA", CONFIG_STRING, "", "NAME[:PORT],...", FIELD(ib_dev), 0, 0,
     "verbs: the RDMA devices to use, as NCCL_IB_HCA: names are prefixes, '=' first for "
     "exact names, '^' first to exclude; rank r takes the (r mod k)-th of the k active "
     "ports that match; empty = every device"},
    {"gid-index", "RING_IB_GID_INDEX", CONFIG_INT, "-1", "", FIELD(gid_index), -1, 255,
     "verbs on RoCE: the GID table index; -1 = the first RoCE v2 GID holding an IPv4 "
     "address"},
    {"ib-timeout", "RING_IB_TIMEOUT", CONFIG_INT, "18", "", FIELD(ib_timeout), 1, 31,
     "verbs: QP ACK timeout, 4.096 us x 2^N per try (18 = 1.07 s; shorter ones retransmit "
     "spuriously on a loaded host, and Soft-RoCE mishandles some retransmitted writes)"},
    {"ib-retry-count", "RING_IB_RETRY_CNT", CONFIG_INT, "7", "", FIELD(ib_retry_count), 0, 7,
     "verbs: retransmissions of an unacknowledged write before it fails naming the peer"},
    {"rendezvous", "RING_RENDEZVOUS", CONFIG_STRING, "", "tcp://HOST:PORT|file:///DIR",
     FIELD(rendezvous), 0, 0,
     "how peers find each other instead of --peers: tcp://HOST:PORT = rank 0 serves a small "
     "store on PORT of HOST (its own host), file:///DIR = files in a directory every peer "
     "shares; a launcher's MASTER_ADDR or Slurm node list sets it (see --print-env)"},
    {"ring-order", "RING_RING_ORDER", CONFIG_CHOICE, "host", "host|rank", FIELD(ring_order), 0,
     0, "order of the ring: host = the peers of one host next to each other (the ring crosses "
        "each host boundary once), in rank order within a host; rank = rank order"},
    {"host-id", "RING_HOST_ID", CONFIG_STRING, "", "NAME", FIELD(host_id), 0, 0,
     "at a rendezvous: the name --ring-order host groups this peer by, instead of its host "
     "name (as NCCL_HOSTID); on Kubernetes, the node's name (spec.nodeName) puts pods of one "
     "node next to each other; empty = the host name"},
    {"iface", "RING_SOCKET_IFNAME", CONFIG_STRING, "", "IFACE,...", FIELD(iface), 0, 0,
     "tcp: interfaces whose addresses peers publish at a rendezvous, as NCCL_SOCKET_IFNAME: "
     "name prefixes, '=' first for exact names, '^' first to exclude; empty = every interface "
     "but lo and docker*, or lo when every peer is on one host"},
    {"autotune", "RING_AUTOTUNE", CONFIG_CHOICE, "off", "off|on", FIELD(autotune), 0, 0,
     "at start-up, time allreduces of --autotune-bytes with every chunk size of "
     "--autotune-chunks and channel count of --autotune-channels on the real ring, and keep "
     "the fastest (rank 0's timing decides; the choice is logged); --chunk-size and "
     "--channels are then ignored"},
    {"autotune-chunks", "RING_AUTOTUNE_CHUNKS", CONFIG_STRING, "64K,256K,1M", "SIZE,...",
     FIELD(autotune_chunks), 0, 0, "autotune: the chunk sizes to try (4K..64M)"},
    {"autotune-channels", "RING_AUTOTUNE_CHANNELS", CONFIG_STRING, "1,2,4", "N,...",
     FIELD(autotune_channels), 0, 0,
     "autotune: the channel counts to try; the ring connects the largest"},
    {"autotune-bytes", "RING_AUTOTUNE_BYTES", CONFIG_SIZE, "16M", "bytes", FIELD(autotune_bytes),
     0, 0, "autotune: the buffer of each timed allreduce (1 warm-up + 3 timed per candidate)"},
    {"codec", "RING_CODEC", CONFIG_CHOICE, "none", "none|fp16|bf16", FIELD(codec), 0, 0,
     "what a gradient travels as: fp32 (none), or fp16/bf16 with fp32 accumulation"},
    {"lz4", "RING_LZ4", CONFIG_CHOICE, "off", "off|on|auto", FIELD(lz4), 0, 0,
     "compress each encoded chunk with lz4 (sent raw when it does not shrink); auto stops "
     "trying on a tensor whose chunks do not shrink and retries now and then"},
    {"progress-thread", "RING_PROGRESS_THREAD", CONFIG_CHOICE, "off", "off|on",
     FIELD(progress_thread), 0, 0,
     "a thread inside libringd advances started requests while the caller computes (the "
     "Python package turns it on); every call then takes the communicator's lock"},
    {"error-feedback", "RING_ERROR_FEEDBACK", CONFIG_CHOICE, "off", "off|on",
     FIELD(error_feedback), 0, 0,
     "keep what this peer's encoding lost and add it to its next contribution to the same "
     "tensor id (fp16/bf16 only)"},
    {"fp16-scaling", "RING_FP16_SCALING", CONFIG_CHOICE, "on", "on|off", FIELD(fp16_scaling), 0,
     0, "scale every fp16 chunk by a power of two (2^-100..2^100) chosen from its largest value, "
        "so chunks within about 1e-38..8e34 neither overflow nor flush to zero (entries far "
        "below their chunk's largest still lose digits)"},
    {"chunk-size", "RING_CHUNK_SIZE", CONFIG_SIZE, "256K", "bytes", FIELD(chunk_bytes), 0, 0,
     "bytes per chunk on the wire; chunks of a segment are pipelined"},
    {"channels", "RING_CHANNELS", CONFIG_INT, "1", "", FIELD(channels), 1, 16,
     "independent rings over disjoint parts of each buffer, each with its own connections"},
    {"tcp-streams", "RING_TCP_STREAMS", CONFIG_INT, "1", "", FIELD(tcp_streams), 1, 16,
     "TCP connections per neighbour and channel; chunks are spread over them"},
    {"tcp-sockbuf", "RING_TCP_SOCKBUF", CONFIG_SIZE, "4M", "bytes", FIELD(tcp_sockbuf), 0, 0,
     "socket send/receive buffer size; 0 leaves it to the kernel's autotuning"},
    {"timeout", "RING_TIMEOUT", CONFIG_DURATION, "30s", "seconds", FIELD(timeout_s), 0, 0,
     "longest wait without progress during an allreduce before failing"},
    {"connect-timeout", "RING_CONNECT_TIMEOUT", CONFIG_DURATION, "120s", "seconds",
     FIELD(connect_timeout_s), 0, 0, "longest wait for the neighbours at start-up"},
    {"spin-us", "RING_SPIN_US", CONFIG_INT, "1000", "microseconds", FIELD(spin_us), 0, 1000000,
     "busy-poll (yielding the CPU) this long before sleeping in poll(); 0 never spins"},
    {"port", "RING_PORT", CONFIG_PORTS, "29500", "PORT|LO-HI", FIELD(port_lo), 0, 0,
     "port for peers entries without one: the k-th peer on a host gets LO+k, within LO-HI"},
    {"bind", "RING_BIND", CONFIG_STRING, "", "ADDR|IFACE", FIELD(bind), 0, 0,
     "listen on this address or interface; default: the host of this rank's peers entry"},
    {"job-id", "RING_JOB_ID", CONFIG_STRING, "0", "text", FIELD(job_id), 0, 0,
     "peers of one job must agree on it; a stranger with another id is refused"},
    {"secret-file", "RING_SECRET_FILE", CONFIG_STRING, "", "FILE", FIELD(secret_file), 0, 0,
     "the job's secret (16 to 4096 bytes; one trailing newline is ignored): every connection "
     "starts with a mutual HMAC-SHA-256 challenge-response on it, and a peer that cannot prove "
     "it is dropped before it is told anything. Without a secret anyone who can reach the "
     "ports can join (ringd says so when it listens beyond loopback)"},
    {"secret", "RING_SECRET", CONFIG_SECRET, "", "TEXT", FIELD(secret), 0, 0,
     "the job's secret as text instead of a file (prefer --secret-file: the environment of a "
     "process can be read by its user's other processes); never printed"},
    {"auth", "RING_AUTH", CONFIG_CHOICE, "connect", "connect|frames", FIELD(auth), 0, 0,
     "with a secret: 'connect' proves it when each connection opens; 'frames' also puts a "
     "tag (GMAC, AES-256-GCM) on every frame and checks it before using a byte, so frames "
     "altered, replayed or injected on an established connection are refused (it costs CPU "
     "per byte: see the README); every peer must agree"},
    {"log-level", "RING_LOG_LEVEL", CONFIG_LOGLEVEL, "none", "none|error|warn|info|debug|trace",
     FIELD(log_level), 0, 0, "library logging to stderr (RING_DEBUG=1 means debug)"},
    {"rate-limit", "RING_RATE_LIMIT", CONFIG_RATE, "0", "RATE (e.g. 1gbit, 125mbps)",
     FIELD(rate_limit_bps), 0, 0,
     "bandwidth cap per connection, sending side; tc-style units (kbit, mbit, gbit are "
     "bits/s; kbps, mbps, gbps and a plain number are bytes/s); 0 = unlimited"},
    {"timeline", "RING_TIMELINE", CONFIG_STRING, "", "FILE", FIELD(timeline), 0, 0,
     "write a Chrome trace-event JSON (chrome://tracing, Perfetto) of every allreduce, per "
     "ring step and phase, to FILE; {rank} in FILE is replaced by the rank (without it only "
     "rank 0 writes); ring-launch --timeline merges the ranks' files; empty = off"},
    {"timeline-max-events", "RING_TIMELINE_MAX_EVENTS", CONFIG_INT, "100000", "",
     FIELD(timeline_max_events), 10, INT_MAX,
     "--timeline: stop recording after this many events (about 200 bytes each), ending the "
     "file with an event that says so"},
};

#define CONFIG_COUNT (sizeof(config_table) / sizeof(config_table[0]))

_Static_assert(CONFIG_COUNT <= sizeof(((ring_config_t *)0)->source), "source[] too small");

static const char *const source_names[] = {"default", "environment", "flag", "api", "launcher"};

static const config_entry_t *config_find(const char *name)
{
    while (name[0] == '-')
        name++;
    for (size_t i = 0; i < CONFIG_COUNT; i++)
        if (strcmp(config_table[i].name, name) == 0)
            return &config_table[i];
    return NULL;
}

static ring_status_t config_bad(const config_entry_t *e, const char *value, const char *why)
{
    return ring_error_set(RING_ERR_INVALID, "invalid value '%s' for --%s (%s): %s; expected %s",
                          value, e->name, e->env, why, e->unit[0] ? e->unit : "a number");
}

static ring_status_t config_apply(ring_config_t *cfg, const config_entry_t *e, const char *value)
{
    char *field = (char *)cfg + e->offset;
    long l;
    size_t sz;
    double d;

    switch (e->type) {
    case CONFIG_INT:
        if (ring_parse_long(value, &l) != 0)
            return config_bad(e, value, "not an integer");
        if (l < e->min || l > e->max) {
            char why[64];
            snprintf(why, sizeof(why), "out of range %ld..%ld", e->min, e->max);
            return config_bad(e, value, why);
        }
        *(int *)field = (int)l;
        return RING_OK;
    case CONFIG_SIZE:
        if (ring_parse_size(value, &sz) != 0)
            return config_bad(e, value, "not a size (e.g. 4096, 64K, 1M, 2G)");
        *(size_t *)field = sz;
        return RING_OK;
    case CONFIG_DURATION:
        if (ring_parse_duration(value, &d) != 0)
            return config_bad(e, value, "not a duration (e.g. 30, 30s, 500ms, 2m)");
        *(double *)field = d;
        return RING_OK;
    case CONFIG_STRING:
        if (strlen(value) >= e->size)
            return config_bad(e, value, "too long");
        memcpy(field, value, strlen(value) + 1);
        return RING_OK;
    case CONFIG_SECRET:
        if (strlen(value) >= e->size)
            return ring_error_set(RING_ERR_INVALID, "--%s (%s): longer than %zu bytes: put it "
                                  "in a file and give --secret-file", e->name, e->env,
                                  e->size - 1);
        memcpy(field, value, strlen(value) + 1);
        return RING_OK;
    case CONFIG_PEERS: {
        char *copy = strdup(value);
        if (copy == NULL)
            return ring_error_set(RING_ERR_NO_MEMORY, "out of memory copying --%s", e->name);
        free(cfg->peers);
        cfg->peers = copy;
        return RING_OK;
    }
    case CONFIG_PORTS: {
        int lo, hi;
        if (ring_parse_port_range(value, &lo, &hi) != 0)
            return config_bad(e, value, "not a port 1..65535 or a range LO-HI");
        cfg->port_lo = lo;
        cfg->port_hi = hi;
        return RING_OK;
    }
    case CONFIG_CHOICE: {
        size_t len = strlen(value);
        const char *w = e->unit;

        /* the unit string lists the accepted words: "none|fp16|bf16" */
        while (*w != '\0') {
            size_t wlen = strcspn(w, "|");
            if (len > 0 && wlen == len && strncmp(w, value, len) == 0 && len < e->size) {
                memcpy(field, value, len + 1);
                return RING_OK;
            }
            w += wlen + (w[wlen] == '|');
        }
        return config_bad(e, value, "not one of the choices");
    }
    case CONFIG_LOGLEVEL:
        if (ring_log_level_parse(value) < 0)
            return config_bad(e, value, "unknown log level");
        snprintf(field, e->size, "%s", value);
        return RING_OK;
    case CONFIG_RATE:
        if (ring_parse_rate(value, &d) != 0)
            return config_bad(e, value, "not a rate (e.g. 1gbit, 500mbit, 125mbps, 0)");
        *(double *)field = d;
        return RING_OK;
    }
    return ring_error_set(RING_ERR_INTERNAL, "config entry %s has no parser", e->name);
}

void ring_config_init(ring_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    for (size_t i = 0; i < CONFIG_COUNT; i++) {
        /* defaults are parsed like user input; a failure here is a bug in the table */
        (void)config_apply(cfg, &config_table[i], config_table[i].defval);
        cfg->source[i] = RING_SRC_DEFAULT;
    }
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

ring_status_t ring_config_set(ring_config_t *cfg, const char *name, const char *value,
                              ring_config_source_t source)
{
    const config_entry_t *e = config_find(name);

    if (e == NULL)
        return ring_error_set(RING_ERR_UNSUPPORTED, "unknown setting '%s'", name);
    RING_CHECK(config_apply(cfg, e, value));
    cfg->source[e - config_table] = (unsigned char)source;
    return RING_OK;
}

extern char **environ;

/* A launcher's value for a setting no RING_* variable gave. */
static ring_status_t config_from_launcher(ring_config_t *cfg, const char *name, const char *value)
{
    const config_entry_t *e = config_find(name);

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
    const config_entry_t *e = config_find(name);

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
    for (size_t i = 0; i < CONFIG_COUNT; i++) {
        const char *value = getenv(config_table[i].env);
        if (value != NULL) {
            RING_CHECK(config_apply(cfg, &config_table[i], value));
            cfg->source[i] = RING_SRC_ENV;
        }
    }
    if (cfg->source[config_find("log-level") - config_table] == RING_SRC_DEFAULT) {
        const char *debug = getenv("RING_DEBUG");
        if (debug != NULL && *debug != '\0' && strcmp(debug, "0") != 0) {
            snprintf(cfg->log_level, sizeof(cfg->log_level), "debug");
            cfg->source[config_find("log-level") - config_table] = RING_SRC_ENV;
        }
    }
    return config_apply_launcher(cfg);
}

/* Variables other parts of ringd read; not in this table, but not typos either. */
static const char *const known_other_env[] = {"RING_DEBUG", "RING_LOCAL_RANK", "RING_KERNEL",
                                              "RING_FAULT", "RING_TEST_SLOW", NULL};

int ring_config_env_known(const char *var, size_t len)
{
    for (size_t i = 0; i < CONFIG_COUNT; i++)
        if (strlen(config_table[i].env) == len && strncmp(config_table[i].env, var, len) == 0)
            return 1;
    for (size_t i = 0; known_other_env[i] != NULL; i++)
        if (strlen(known_other_env[i]) == len && strncmp(known_other_env[i], var, len) == 0)
            return 1;
    return 0;
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
            unknown++;
            if (out != NULL)
                fprintf(out, "warning: unknown environment variable %.*s ignored "
                             "(see --help for the RING_* variables)\n", (int)len, var);
        }
    }
    return unknown;
}

ring_status_t ring_config_parse_arg(ring_config_t *cfg, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    char name[64];
    const char *eq, *value;
    const config_entry_t *e;

    if (strncmp(arg, "--", 2) != 0)
        return RING_ERR_UNSUPPORTED;
    eq = strchr(arg, '=');
    snprintf(name, sizeof(name), "%.*s", (int)(eq != NULL ? (size_t)(eq - arg - 2) : strlen(arg + 2)),
             arg + 2);
    e = config_find(name);
    if (e == NULL)
        return RING_ERR_UNSUPPORTED;
    if (eq != NULL) {
        value = eq + 1;
        *i += 1;
    } else {
        if (*i + 1 >= argc)
            return ring_error_set(RING_ERR_INVALID, "option --%s needs a value (%s)", e->name,
                                  e->unit[0] ? e->unit : "a number");
        value = argv[*i + 1];
        *i += 2;
    }
    RING_CHECK(config_apply(cfg, e, value));
    cfg->source[e - config_table] = RING_SRC_FLAG;
    return RING_OK;
}

ring_status_t ring_config_validate(const ring_config_t *cfg)
{
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
    if (cfg->world_size > 1 && ring_config_uses_rendezvous(cfg)) {
        ring_rdzv_url_t url;
        char why[300];

        if (ring_rdzv_url_parse(cfg->rendezvous, &url, why, sizeof(why)) != 0)
            return ring_error_set(RING_ERR_INVALID, "--rendezvous / RING_RENDEZVOUS '%s': %s",
                                  cfg->rendezvous, why);
    } else if (cfg->world_size > 1) {
        ring_peer_addr_t *addrs;
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
    {
        vb_hca_spec_t hca;
        char why[256];
    if (strcmp(cfg->autotune, "on") == 0) {
        ring_autotune_space_t sp;
        char bad[300];

        if (ring_autotune_parse(cfg->autotune_chunks, cfg->autotune_channels, &sp, bad,
                                sizeof(bad)) != 0)
            return ring_error_set(RING_ERR_INVALID, "%s", bad);
        if (cfg->autotune_bytes < 4096 || cfg->autotune_bytes > (1u << 30))
            return ring_error_set(RING_ERR_INVALID, "--autotune-bytes %zu is out of range "
                                  "4K..1G", cfg->autotune_bytes);
    }

        if (vb_hca_parse(cfg->ib_dev, &hca, why, sizeof(why)) != 0)
            return ring_error_set(RING_ERR_INVALID, "%s (RING_IB_HCA / --ib-dev)", why);
    }
    return RING_OK;
}

static void config_format(const ring_config_t *cfg, const config_entry_t *e, char *buf,
                          size_t len)
{
    const char *field = (const char *)cfg + e->offset;

    switch (e->type) {
    case CONFIG_INT:
        snprintf(buf, len, "%d", *(const int *)field);
        break;
    case CONFIG_SIZE:
        ring_format_size(*(const size_t *)field, buf, len);
        break;
    case CONFIG_DURATION:
        snprintf(buf, len, "%gs", *(const double *)field);
        break;
    case CONFIG_PEERS:
        snprintf(buf, len, "%s", cfg->peers != NULL ? cfg->peers : "");
        break;
    case CONFIG_RATE:
        ring_format_rate(*(const double *)field, buf, len);
        break;
    case CONFIG_SECRET:
        snprintf(buf, len, "%s", field[0] != '\0' ? "(set)" : "");
        break;
    case CONFIG_PORTS:
        if (cfg->port_lo == cfg->port_hi)
            snprintf(buf, len, "%d", cfg->port_lo);
        else
            snprintf(buf, len, "%d-%d", cfg->port_lo, cfg->port_hi);
        break;
    default:
        snprintf(buf, len, "%s", field);
        break;
    }
}

ring_status_t ring_config_get(const ring_config_t *cfg, const char *name, char *buf, size_t len)
{
    const config_entry_t *e = config_find(name);
    char value[4608];

    if (e == NULL)
        return ring_error_set(RING_ERR_UNSUPPORTED, "unknown setting '%s'", name);
    config_format(cfg, e, value, sizeof(value));
    if (buf == NULL || strlen(value) >= len)
        return ring_error_set(RING_ERR_INVALID, "ring_config_get: the value of --%s needs %zu "
                              "bytes, the buffer has %zu", e->name, strlen(value) + 1, len);
    memcpy(buf, value, strlen(value) + 1);
    return RING_OK;
}

void ring_config_print_help(FILE *out)
{
    for (size_t i = 0; i < CONFIG_COUNT; i++) {
        const config_entry_t *e = &config_table[i];
        char flag[64];

        snprintf(flag, sizeof(flag), "--%s %s", e->name, e->unit[0] ? e->unit : "N");
        fprintf(out, "  %s\n      %s\n      env %s, default %s\n", flag, e->doc, e->env,
                e->defval[0] ? e->defval : "(none)");
    }
}

/* The launcher variable behind a setting, for --print-config. */
static const char *config_launcher_var(const ring_config_t *cfg, const config_entry_t *e)
{
    const ring_launch_t *l = &cfg->launch;

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
    for (size_t i = 0; i < CONFIG_COUNT; i++) {
        char value[512];
        config_format(cfg, &config_table[i], value, sizeof(value));
        fprintf(out, "%-16s %-24s (%s%s%s, %s)\n", config_table[i].name,
                value[0] ? value : "\"\"", source_names[cfg->source[i] < 5 ? cfg->source[i] : 0],
                cfg->source[i] == RING_SRC_LAUNCHER ? " " : "",
                cfg->source[i] == RING_SRC_LAUNCHER ? config_launcher_var(cfg, &config_table[i])
                                                    : "", config_table[i].env);
    }
}
