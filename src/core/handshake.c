/*
 * handshake.c - the hello every connection starts with: what this peer is
 * and the settings that must agree. A mismatch names the first differing
 * field and both ranks, so a misconfigured job fails in one line instead of
 * hanging or computing garbage.
 */
#include "ring_build.h"

#include <inttypes.h>
#include <string.h>

#include "comm_int.h"

static uint64_t handshake_settings_hash(const ring_hello_t *h)
{
    uint64_t v = RING_HASH_INIT;
    uint64_t fields[] = {h->version, h->job_hash, h->world_size, h->channels,
                         h->streams, h->chunk_bytes, h->transport, h->peers_hash,
                         h->codec, h->fp16_scaling, h->auth_frames, h->algo,
                         h->rd_max_bytes, h->rd_fit};

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
    h->chunk_bytes = comm->autotuned ? 0 : comm->cfg.chunk_bytes;
    h->transport = strcmp(comm->tp_ops->name, "verbs") == 0 ? 2
                   : strcmp(comm->tp_ops->name, "shm") == 0 ? 3 : 1;
    h->codec = (uint8_t)comm->codec;
    h->fp16_scaling = (uint8_t)comm->fp16_scaling;
    h->auth_frames = (uint8_t)comm->auth_frames;
    h->algo = strcmp(comm->cfg.algo, "ring") == 0 ? 1 : strcmp(comm->cfg.algo, "rd") == 0 ? 2
            : strcmp(comm->cfg.algo, "direct") == 0 ? 3 : 0;
    h->rd_max_bytes = comm->cfg.rd_max_bytes;
    h->rd_fit = strcmp(comm->cfg.rd_fit, "on") == 0;
    h->peers_hash = ring_hash_bytes(RING_HASH_INIT, peers, strlen(peers));
    h->settings_hash = handshake_settings_hash(h);
    snprintf(h->job_text, sizeof(h->job_text), "%s", comm->cfg.job_id);
}

#define HELLO_DIFF(_field, _name, _fmt)                                                        \
    if (mine->_field != theirs->_field)                                                        \
    return ring_error_set(RING_ERR_MISMATCH,                                                   \
                          "settings mismatch with rank %u (%s): %s differs: rank %d has "      \
                          _fmt ", rank %u has " _fmt, theirs->rank, peer_addr, _name,         \
                          comm->rank, mine->_field, theirs->rank, theirs->_field)

/* A field that holds one of a few choices: named by word, not by number. */
static const char *const transport_names[] = {"?", "tcp", "verbs", "shm"};
static const char *const codec_names[] = {"none", "fp16", "bf16"};
static const char *const on_off_names[] = {"off", "on"};
static const char *const auth_names[] = {"connect", "frames"};
static const char *const algo_names[] = {"auto", "ring", "rd", "direct"};
#define CHOICE(_names, _v) \
    ((_v) < sizeof(_names) / sizeof(_names[0]) ? _names[(_v)] : "unknown")
#define HELLO_DIFF_NAMED(_field, _name, _names)                                               \
    if (mine->_field != theirs->_field)                                                        \
    return ring_error_set(RING_ERR_MISMATCH,                                                   \
                          "settings mismatch with rank %u (%s): %s differs: rank %d has %s, "  \
                          "rank %u has %s", theirs->rank, peer_addr, _name, comm->rank,        \
                          CHOICE(_names, (unsigned)mine->_field), theirs->rank,                \
                          CHOICE(_names, (unsigned)theirs->_field))

ring_status_t ring_hello_check(const ring_comm_t *comm, const ring_hello_t *mine,
                               const ring_hello_t *theirs, const char *peer_addr)
{
    if (theirs->version != mine->version)
        return ring_error_set(RING_ERR_MISMATCH,
                              "settings mismatch with rank %u (%s): protocol version differs: "
                              "rank %d speaks %u, rank %u speaks %u (run the same ringd "
                              "version on every peer)", theirs->rank, peer_addr, comm->rank,
                              mine->version, theirs->rank, theirs->version);
    if (theirs->job_hash != mine->job_hash)
        return ring_error_set(RING_ERR_MISMATCH,
                              "settings mismatch with rank %u (%s): job id differs: rank %d has "
                              "'%s', rank %u has '%s' (is another job using this port?)",
                              theirs->rank, peer_addr, comm->rank, mine->job_text, theirs->rank,
                              theirs->job_text);
    HELLO_DIFF(world_size, "world size (RING_WORLD_SIZE)", "%u");
    if ((mine->chunk_bytes == 0) != (theirs->chunk_bytes == 0))
        return ring_error_set(RING_ERR_MISMATCH,
                              "settings mismatch with rank %u (%s): autotune differs: rank %d has "
                              "it %s, rank %u %s (RING_AUTOTUNE)", theirs->rank, peer_addr,
                              comm->rank, mine->chunk_bytes == 0 ? "on" : "off", theirs->rank,
                              theirs->chunk_bytes == 0 ? "on" : "off");
    HELLO_DIFF(peers_hash, "peer list (RING_PEERS)", "hash %016" PRIx64);
    HELLO_DIFF(channels, "channels (RING_CHANNELS)", "%u");
    HELLO_DIFF(streams, "tcp streams (RING_TCP_STREAMS)", "%u");
    HELLO_DIFF(chunk_bytes, "chunk size (RING_CHUNK_SIZE)", "%" PRIu64);
    HELLO_DIFF_NAMED(transport, "transport (RING_TRANSPORT)", transport_names);
    HELLO_DIFF_NAMED(codec, "codec (RING_CODEC)", codec_names);
    HELLO_DIFF_NAMED(fp16_scaling, "fp16 scaling (RING_FP16_SCALING)", on_off_names);
    HELLO_DIFF_NAMED(auth_frames, "frame authentication (--auth, RING_AUTH)", auth_names);
    HELLO_DIFF_NAMED(algo, "allreduce algorithm (--algo, RING_ALGO)", algo_names);
    /* hashed, not sent: --rd-max-bytes, --rd-fit (or a field a future version hashes) */
    if (mine->settings_hash != theirs->settings_hash)
        return ring_error_set(RING_ERR_MISMATCH,
                              "settings mismatch with rank %u (%s): the settings hash differs: "
                              "--rd-max-bytes (RING_RD_MAX_BYTES) or --rd-fit (RING_RD_FIT) "
                              "differs (this peer has %" PRIu64 " and %s), or a setting of "
                              "another ringd version: give every peer the same",
                              theirs->rank, peer_addr, mine->rd_max_bytes,
                              mine->rd_fit ? "on" : "off");
    return RING_OK;
}
