/*
 * handshake.c - the hello every connection starts with: what this peer is
 * and the settings that must agree. A mismatch names the first differing
 * field and both ranks, so a misconfigured job fails in one line instead of
 * hanging or computing garbage.
 */
#include "ring_build.h"

#include <inttypes.h>
#include <string.h>

#include "algo.h"
#include "comm_int.h"
#include "handshake.h"

/* Over every setting, those the hello carries too, but not the peer list's
 * hash: that is compared on its own (and a test's proxy may stand in for a
 * peer in one list, tests/ring/t-auth-splice.c). */
static uint64_t handshake_settings_hash(const ring_hello_t *h)
{
    uint64_t v = RING_HASH_INIT;
    uint64_t fields[] = {h->version, h->job_hash, h->world_size, h->channels,
                         h->streams, h->chunk_bytes, h->transport,
                         h->codec, h->fp16_scaling, h->auth_frames, h->algo,
                         h->rd_max_bytes, h->rd_fit, h->rh_max_bytes, h->rh_piece_bytes};

    return ring_hash_bytes(v, fields, sizeof(fields));
}

void ring_hello_fill(const ring_comm_t *comm, int channel, int stream, ring_hello_t *h)
{
    const char *peers = comm->cfg.peers != NULL ? comm->cfg.peers : "";

    memset(h, 0, sizeof(*h));
    h->magic = RING_HELLO_MAGIC;
    h->version = RING_WIRE_VERSION;
    h->job_hash = ring_hash_bytes(RING_HASH_INIT, comm->cfg.job_id, strlen(comm->cfg.job_id));
    h->rank = (uint32_t)comm->rank;
    h->world_size = (uint32_t)comm->size;
    h->channel = (uint32_t)channel;
    h->stream = (uint32_t)stream;
    h->channels = (uint32_t)comm->nchannels;
    h->streams = (uint32_t)comm->nstreams;
    /* autotuned: the chunk size is chosen later, together; 0 says so */
    h->chunk_bytes = comm->tune.on ? 0 : comm->cfg.chunk_bytes;
    h->transport = comm->tp_ops->kind == RING_TP_VERBS ? 2
                   : comm->tp_ops->kind == RING_TP_SHM ? 3 : 1;
    /* auto is its own setting: a peer with fp16 must not meet one that may pick fp32 */
    h->codec = comm->cfg.codec == RING_CFG_CODEC_AUTO ? 3 : (uint8_t)comm->enc.codec;
    h->fp16_scaling = (uint8_t)comm->enc.fp16_scaling;
    h->auth_frames = (uint8_t)(comm->auth.encrypt ? 2 : comm->auth.frames);
    h->algo = comm->cfg.algo == RING_CFG_ALGO_RING ? 1 : comm->cfg.algo == RING_CFG_ALGO_RD ? 2
            : comm->cfg.algo == RING_CFG_ALGO_DIRECT ? 3 : 0;
    h->rd_max_bytes = comm->cfg.rd_max_bytes;
    h->rd_fit = comm->cfg.rd_fit != 0;
    h->rh_max_bytes = comm->cfg.rh_max_bytes;
    h->rh_piece_bytes = comm->cfg.rh_piece_bytes;
    h->peers_hash = ring_hash_bytes(RING_HASH_INIT, peers, strlen(peers));
    h->settings_hash = handshake_settings_hash(h);
    snprintf(h->job_text, sizeof(h->job_text), "%s", comm->cfg.job_id);
}

void ring_hello_for_join(ring_hello_t *h, uint32_t rank)
{
    h->world_size = 0;
    h->peers_hash = 0;
    h->rank = rank;
    h->settings_hash = handshake_settings_hash(h);
}

/* The settings a hello carries, in the order they are checked (the first one
 * that differs is named, and sent in a start-up ABORT's detail by its number). */
enum hello_field {
    HF_NONE, HF_VERSION, HF_JOB, HF_WORLD, HF_AUTOTUNE, HF_PEERS, HF_CHANNELS, HF_STREAMS,
    HF_CHUNK, HF_TRANSPORT, HF_CODEC, HF_FP16_SCALING, HF_AUTH, HF_ALGO, HF_HASH, HF_COUNT
};

static const char *const field_names[HF_COUNT] = {
    [HF_NONE] = "a setting",
    [HF_VERSION] = "protocol version (the ringd version)",
    [HF_JOB] = "job id (RING_JOB_ID)",
    [HF_WORLD] = "world size (RING_WORLD_SIZE)",
    [HF_AUTOTUNE] = "autotune (RING_AUTOTUNE)",
    [HF_PEERS] = "peer list (RING_PEERS)",
    [HF_CHANNELS] = "channels (RING_CHANNELS)",
    [HF_STREAMS] = "tcp streams (RING_TCP_STREAMS)",
    [HF_CHUNK] = "chunk size (RING_CHUNK_SIZE)",
    [HF_TRANSPORT] = "transport (RING_TRANSPORT)",
    [HF_CODEC] = "codec (RING_CODEC)",
    [HF_FP16_SCALING] = "fp16 scaling (RING_FP16_SCALING)",
    [HF_AUTH] = "frame authentication (--auth, RING_AUTH)",
    [HF_ALGO] = "allreduce algorithm (--algo, RING_ALGO)",
    /* one literal in parentheses: clang's -Wstring-concatenation asks it of array elements */
    [HF_HASH] = ("--rd-max-bytes (RING_RD_MAX_BYTES), --rh-max-bytes (RING_RH_MAX_BYTES), "
                 "--rh-piece-bytes (RING_RH_PIECE_BYTES) or --rd-fit (RING_RD_FIT)"),
};

const char *ring_hello_field_name(unsigned field)
{
    return field < HF_COUNT ? field_names[field] : field_names[HF_NONE];
}

unsigned ring_hello_first_diff(const ring_hello_t *mine, const ring_hello_t *theirs)
{
    const ring_hello_t *a = mine, *b = theirs;

    if (a->version != b->version)
        return HF_VERSION;
    if (a->job_hash != b->job_hash)
        return HF_JOB;
    if (a->world_size != b->world_size)
        return HF_WORLD;
    if ((a->chunk_bytes == 0) != (b->chunk_bytes == 0))
        return HF_AUTOTUNE;
    if (a->peers_hash != b->peers_hash)
        return HF_PEERS;
    if (a->channels != b->channels)
        return HF_CHANNELS;
    if (a->streams != b->streams)
        return HF_STREAMS;
    if (a->chunk_bytes != b->chunk_bytes)
        return HF_CHUNK;
    if (a->transport != b->transport)
        return HF_TRANSPORT;
    if (a->codec != b->codec)
        return HF_CODEC;
    if (a->fp16_scaling != b->fp16_scaling)
        return HF_FP16_SCALING;
    if (a->auth_frames != b->auth_frames)
        return HF_AUTH;
    if (a->algo != b->algo)
        return HF_ALGO;
    /* hashed, not sent: --rd-max-bytes, --rd-fit (or a field a future version hashes) */
    return a->settings_hash != b->settings_hash ? HF_HASH : HF_NONE;
}

/* A field that holds one of a few choices: named by word, not by number. */
static const char *const transport_names[] = {"?", "tcp", "verbs", "shm"};
static const char *const codec_names[] = {"none", "fp16", "bf16", "auto"};
static const char *const on_off_names[] = {"off", "on"};
static const char *const auth_names[] = {"connect", "frames", "encrypt"};
static const char *const algo_names[] = {"auto", "ring", "rd", "direct"};
#define CHOICE(_names, _v) \
    ((_v) < sizeof(_names) / sizeof(_names[0]) ? _names[(_v)] : "unknown")
#define DIFF_NUM(_field, _fmt)                                                                 \
    return ring_error_set(RING_ERR_MISMATCH,                                                   \
                          "settings mismatch with rank %u (%s): %s differs: rank %d has "      \
                          _fmt ", rank %u has " _fmt, theirs->rank, peer_addr, name,          \
                          comm->rank, mine->_field, theirs->rank, theirs->_field)
#define DIFF_NAMED(_field, _names)                                                             \
    return ring_error_set(RING_ERR_MISMATCH,                                                   \
                          "settings mismatch with rank %u (%s): %s differs: rank %d has %s, "  \
                          "rank %u has %s", theirs->rank, peer_addr, name, comm->rank,        \
                          CHOICE(_names, (unsigned)mine->_field), theirs->rank,                \
                          CHOICE(_names, (unsigned)theirs->_field))

ring_status_t ring_hello_check(const ring_comm_t *comm, const ring_hello_t *mine,
                               const ring_hello_t *theirs, const char *peer_addr)
{
    unsigned field = ring_hello_first_diff(mine, theirs);
    const char *name = ring_hello_field_name(field);

    switch (field) {
    case HF_NONE:
        return RING_OK;
    case HF_VERSION:
        return ring_error_set(RING_ERR_MISMATCH,
                              "settings mismatch with rank %u (%s): protocol version differs: "
                              "rank %d speaks %u, rank %u speaks %u (run the same ringd "
                              "version on every peer)", theirs->rank, peer_addr, comm->rank,
                              mine->version, theirs->rank, theirs->version);
    case HF_JOB:
        return ring_error_set(RING_ERR_MISMATCH,
                              "settings mismatch with rank %u (%s): job id differs: rank %d has "
                              "'%s', rank %u has '%s' (is another job using this port?)",
                              theirs->rank, peer_addr, comm->rank, mine->job_text, theirs->rank,
                              theirs->job_text);
    case HF_WORLD:
        DIFF_NUM(world_size, "%u");
    case HF_AUTOTUNE:
        return ring_error_set(RING_ERR_MISMATCH,
                              "settings mismatch with rank %u (%s): autotune differs: rank %d has "
                              "it %s, rank %u %s (RING_AUTOTUNE)", theirs->rank, peer_addr,
                              comm->rank, mine->chunk_bytes == 0 ? "on" : "off", theirs->rank,
                              theirs->chunk_bytes == 0 ? "on" : "off");
    case HF_PEERS:
        DIFF_NUM(peers_hash, "hash %016" PRIx64);
    case HF_CHANNELS:
        DIFF_NUM(channels, "%u");
    case HF_STREAMS:
        DIFF_NUM(streams, "%u");
    case HF_CHUNK:
        DIFF_NUM(chunk_bytes, "%" PRIu64);
    case HF_TRANSPORT:
        DIFF_NAMED(transport, transport_names);
    case HF_CODEC:
        DIFF_NAMED(codec, codec_names);
    case HF_FP16_SCALING:
        DIFF_NAMED(fp16_scaling, on_off_names);
    case HF_AUTH:
        DIFF_NAMED(auth_frames, auth_names);
    case HF_ALGO:
        DIFF_NAMED(algo, algo_names);
    default:
        return ring_error_set(RING_ERR_MISMATCH,
                              "settings mismatch with rank %u (%s): the settings hash differs: "
                              "--rd-max-bytes (RING_RD_MAX_BYTES), --rh-max-bytes "
                              "(RING_RH_MAX_BYTES), --rh-piece-bytes (RING_RH_PIECE_BYTES) or "
                              "--rd-fit (RING_RD_FIT) differs (this peer has %" PRIu64 ", %"
                              PRIu64 ", %" PRIu64 " and %s), or a setting of another ringd "
                              "version: give every peer the same",
                              theirs->rank, peer_addr, mine->rd_max_bytes, mine->rh_max_bytes,
                              mine->rh_piece_bytes, mine->rd_fit ? "on" : "off");
    }
}
