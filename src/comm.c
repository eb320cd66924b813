/*
 * comm.c - the public communicator API: open (validate the config, parse
 * the peers, connect the ring), close (tell the neighbours, free), and the
 * allreduce entry points that queue requests for the engine (allreduce.c).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "comm_int.h"
#include "log.h"
#include "progress_thread.h"
#include "rendezvous.h"
#include "ring_order.h"
#include "timeline.h"

static void comm_free(ring_comm_t *comm)
{
    ring_tl_close(comm); /* hook: timeline.c writes out what it buffered */
    for (int c = 0; c < RING_MAX_CHANNELS; c++) {
        ring_channel_t *ch = &comm->channels[c];
        for (int s = 0; s < RING_MAX_STREAMS; s++) {
            if (ch->right[s] != NULL)
                comm->tp_ops->ep_close(ch->right[s]);
            if (ch->left[s] != NULL)
                comm->tp_ops->ep_close(ch->left[s]);
        }
        free(ch->stage);
        ring_enc_channel_free(ch);
    }
    ring_enc_comm_free(comm);
    ring_coll_comm_free(comm);
    ring_dev_comm_free(comm); /* hook: device.c's host staging */
    ring_doctor_free(comm);   /* hook: doctor.c's requests, after the endpoints are closed */
    ring_frame_macs_free(comm->macs);
    if (comm->listener != NULL)
        comm->tp_ops->listener_close(comm->listener);
    ring_rendezvous_close(comm);
    if (comm->tp != NULL)
        comm->tp_ops->fini(comm->tp);
    for (int r = 0; comm->hosts != NULL && r < comm->size; r++)
        free(comm->hosts[r]);
    free(comm->hosts);
    free(comm->order);
    free(comm->peers);
    ring_config_free(&comm->cfg);
    free(comm);
}

/* The peer list the user gave: each rank's host is its entry's host. */
static ring_status_t comm_static_peers(ring_comm_t *comm)
{
    const ring_config_t *cfg = &comm->cfg;

    RING_CHECK(ring_peers_parse(cfg->peers, cfg->world_size, cfg->port_lo, cfg->port_hi,
                                &comm->peers));
    comm->hosts = calloc((size_t)comm->size, sizeof(*comm->hosts));
    if (comm->hosts == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %d peers", comm->size);
    for (int r = 0; r < comm->size; r++)
        if ((comm->hosts[r] = strdup(comm->peers[r].host)) == NULL)
            return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %d peers", comm->size);
    return RING_OK;
}

/* This peer's place on the ring and its neighbours (--ring-order). */
static ring_status_t comm_place(ring_comm_t *comm)
{
    comm->order = malloc((size_t)comm->size * sizeof(*comm->order));
    if (comm->order == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %d peers", comm->size);
    if (strcmp(comm->cfg.ring_order, "rank") == 0)
        ring_order_by_rank(comm->size, comm->order);
    else if (ring_order_by_host((const char *const *)comm->hosts, comm->size, comm->order) != 0)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %d peers", comm->size);
    for (int p = 0; p < comm->size; p++)
        if (comm->order[p] == comm->rank)
            comm->pos = p;
    comm->left_rank = comm->order[(comm->pos + comm->size - 1) % comm->size];
    comm->right_rank = comm->order[(comm->pos + 1) % comm->size];
    ring_order_describe((const char *const *)comm->hosts, comm->order, comm->size,
                        comm->order_desc, sizeof(comm->order_desc));
    ring_peer_format(&comm->peers[comm->left_rank], comm->left_addr, sizeof(comm->left_addr));
    ring_peer_format(&comm->peers[comm->right_rank], comm->right_addr, sizeof(comm->right_addr));
    ring_log(RING_LOG_INFO, "ring order (%s): %s", comm->cfg.ring_order, comm->order_desc);
    return RING_OK;
}

static ring_status_t comm_setup(ring_comm_t *comm, const ring_config_t *cfg)
{
    ring_tp_params_t params = {.sockbuf = cfg->tcp_sockbuf,
                               .rate_limit_bps = cfg->rate_limit_bps,
                               .rank = cfg->rank,
                               .ib_dev = cfg->ib_dev,
                               .gid_index = cfg->gid_index,
                               .ib_timeout = cfg->ib_timeout,
                               .ib_retry_count = cfg->ib_retry_count};
    int level = ring_log_level_parse(cfg->log_level);
    char why[512];

    RING_CHECK(ring_config_validate(cfg));
    RING_CHECK(ring_config_copy(&comm->cfg, cfg));
    RING_CHECK(ring_auth_key_load(cfg, &comm->auth_key));
    params.auth_key = &comm->auth_key;
    comm->auth_frames = strcmp(cfg->auth, "frames") == 0;
    if (comm->auth_frames && !comm->auth_key.on)
        return ring_error_set(RING_ERR_INVALID, "--auth frames (RING_AUTH) needs the job's secret: "
                              "give --secret-file FILE or RING_SECRET_FILE (ring-launch makes one)");
    comm->hdr_bytes = RING_FRAME_BYTES + (comm->auth_frames ? RING_FRAME_TRAILER_BYTES : 0);
    if (comm->auth_frames && (comm->macs = ring_frame_macs_new()) == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for --auth frames");
    if (level > 0)
        ring_log_set_level((ring_log_level_t)level);
    ring_log_set_rank(cfg->rank);
    comm->rank = cfg->rank;
    comm->size = cfg->world_size;
    comm->nchannels = cfg->channels;
    if (strcmp(cfg->autotune, "on") == 0 && cfg->world_size > 1) {
        if (ring_autotune_parse(cfg->autotune_chunks, cfg->autotune_channels, &comm->autotune,
                                why, sizeof(why)) != 0)
            return ring_error_set(RING_ERR_INVALID, "%s", why);
        /* connect every channel and size the buffers for every chunk a candidate uses */
        comm->autotuned = 1;
        comm->nchannels = comm->autotune.max_channels;
        comm->cfg.chunk_bytes = comm->autotune.max_chunk;
    }
    comm->nstreams = cfg->tcp_streams;
    comm->codec = strcmp(cfg->codec, "fp16") == 0   ? RING_CODEC_FP16
                  : strcmp(cfg->codec, "bf16") == 0 ? RING_CODEC_BF16
                                                    : RING_CODEC_NONE;
    comm->fp16_scaling = strcmp(cfg->fp16_scaling, "off") != 0;
    comm->lz4_mode = strcmp(cfg->lz4, "on") == 0 ? 1 : strcmp(cfg->lz4, "auto") == 0 ? 2 : 0;
    comm->error_feedback = strcmp(cfg->error_feedback, "on") == 0;
    /* fault injection for tests: this peer corrupts every lz4 chunk it sends */
    comm->fault_lz4_corrupt = getenv("RING_FAULT") != NULL &&
                              strcmp(getenv("RING_FAULT"), "lz4-corrupt") == 0;
    /* ... or alters its third data frame after tagging it (--auth frames) */
    comm->fault_frame_tag = getenv("RING_FAULT") != NULL &&
                            strcmp(getenv("RING_FAULT"), "frame-tag") == 0;
    comm->kops = ring_codec_ops();
    ring_log(RING_LOG_INFO, "codec %s, kernels %s", cfg->codec, ring_codec_ops_choice());
    RING_CHECK(ring_tl_open(comm)); /* hook: timeline.c, --timeline (a bad path fails here) */
    RING_CHECK(ring_coll_comm_alloc(comm));
    if (comm->size == 1) {
        comm->tp_ops = ring_tp_find("tcp");
        comm->left_rank = comm->right_rank = comm->pos = 0;
        return RING_OK; /* a ring of one needs no peers, no sockets and no RDMA device */
    }
    comm->tp_ops = ring_tp_choose(cfg->transport, &params, why, sizeof(why));
    if (comm->tp_ops == NULL)
        return ring_error_set(RING_ERR_UNSUPPORTED, "transport '%s' is not in this build (it has: %s)",
                              cfg->transport, ring_tp_names());
    if (why[0] != '\0')
        ring_log(RING_LOG_INFO, "transport auto: tcp, because %s", why);
    for (int c = 0; c < comm->nchannels; c++) {
        comm->channels[c].index = c;
        RING_CHECK(ring_enc_channel_alloc(comm, &comm->channels[c]));
        comm->channels[c].stage = malloc(RING_WINDOW * comm->cfg.chunk_bytes);
        if (comm->channels[c].stage == NULL)
            return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %d staging chunks of %zu "
                                  "bytes", RING_WINDOW, comm->cfg.chunk_bytes);
    }
    RING_CHECK(comm->tp_ops->init(&params, &comm->tp));
    if (ring_config_uses_rendezvous(cfg))
        RING_CHECK(ring_rendezvous(comm));
    else
        RING_CHECK(comm_static_peers(comm));
    RING_CHECK(comm_place(comm));
    /* frame headers live in the channels' slots: registered, they need no copy either */
    if (comm->tp_ops->reg_mem(comm->tp, comm->channels, sizeof(comm->channels)) != RING_OK)
        ring_log(RING_LOG_DEBUG, "%s", ring_last_error());
    RING_CHECK(ring_connect_ring(comm));
    ring_channel_post_back(comm, &comm->channels[0]);
    if (comm->autotuned)
        RING_CHECK(ring_autotune(comm));
    return RING_OK;
}

ring_status_t ring_comm_open(const ring_config_t *cfg, ring_comm_t **comm_p)
{
    ring_comm_t *comm;
    ring_status_t status;

    if (cfg == NULL || comm_p == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_open: cfg and comm_p must not be NULL");
    comm = calloc(1, sizeof(*comm));
    if (comm == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for a communicator");
    status = comm_setup(comm, cfg);
    if (status == RING_OK && comm->size > 1 && strcmp(cfg->progress_thread, "on") == 0)
        status = ring_progress_start(comm);
    if (status != RING_OK) {
        comm_free(comm);
        return status;
    }
    *comm_p = comm;
    return RING_OK;
}

void ring_comm_close(ring_comm_t *comm)
{
    if (comm == NULL)
        return;
    ring_progress_stop(comm);
    if (comm->size > 1 && comm->tp != NULL && comm->error == RING_OK)
        ring_comm_send_close(comm);
    comm_free(comm);
}

int ring_comm_rank(const ring_comm_t *comm)
{
    return comm->rank;
}

int ring_comm_size(const ring_comm_t *comm)
{
    return comm->size;
}

const char *ring_comm_transport(const ring_comm_t *comm)
{
    return comm->tp_ops->name;
}

const char *ring_comm_ring_order(const ring_comm_t *comm)
{
    return comm->order_desc;
}

const char *ring_comm_autotune_report(const ring_comm_t *comm)
{
    return comm->autotune_desc;
}

ring_status_t ring_comm_register(ring_comm_t *comm, void *buf, size_t bytes)
{
    if (comm == NULL || buf == NULL || bytes == 0)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_register: a communicator, a buffer "
                              "and a size are needed");
    return comm->tp == NULL ? RING_OK : comm->tp_ops->reg_mem(comm->tp, buf, bytes);
}

ring_status_t ring_comm_deregister(ring_comm_t *comm, void *buf)
{
    if (comm == NULL || buf == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_deregister: a communicator and a "
                              "buffer are needed");
    return comm->tp == NULL ? RING_OK : comm->tp_ops->dereg_mem(comm->tp, buf);
}

ring_status_t ring_allreduce_start(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t count, ring_dtype_t dtype, ring_op_t op,
                                   uint32_t tensor_id, ring_request_t **req_p)
{
    return ring_allreduce_start_flags(comm, sendbuf, recvbuf, count, dtype, op, tensor_id, 0,
                                      req_p);
}

ring_status_t ring_request_next(ring_comm_t *comm, ring_request_t **slot_p)
{
    ring_request_t *req;
    size_t *offsets;

    if (comm->error != RING_OK)
        return ring_error_copy(comm->error, comm->error_msg);
    if (comm->req_count == RING_MAX_REQUESTS)
        return ring_error_set(RING_ERR_NO_RESOURCE, "%d requests already started and not "
                              "waited for", RING_MAX_REQUESTS);
    req = &comm->reqs[(comm->req_head + comm->req_count) % RING_MAX_REQUESTS];
    offsets = req->offsets; /* the slot's own table (collectives.c) */
    memset(req, 0, sizeof(*req));
    req->offsets = offsets;
    *slot_p = req;
    return RING_OK;
}

ring_status_t ring_request_push(ring_comm_t *comm, ring_request_t *req, ring_request_t **req_p)
{
    req->comm = comm;
    req->round = comm->next_round++;
    req->in_use = 1;
    comm->req_count++;
    if (comm->progress != NULL)
        ring_progress_kick(comm);
    else
        (void)ring_comm_progress(comm);
    *req_p = req;
    return RING_OK;
}

ring_status_t ring_allreduce_start_flags(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         size_t count, ring_dtype_t dtype, ring_op_t op,
                                         uint32_t tensor_id, unsigned flags,
                                         ring_request_t **req_p)
{
    ring_request_t *req;
    ring_status_t status;

    if (comm == NULL || req_p == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_allreduce_start: comm and req_p must not "
                              "be NULL");
    if (count > 0 && (sendbuf == NULL || recvbuf == NULL))
        return ring_error_set(RING_ERR_INVALID, "allreduce of %zu elements with a NULL buffer",
                              count);
    if ((unsigned)op >= RING_OP_COUNT)
        return ring_error_set(RING_ERR_INVALID, "allreduce: unknown op %d", (int)op);
    if ((unsigned)dtype >= RING_DTYPE_COUNT)
        return ring_error_set(RING_ERR_INVALID, "allreduce: unknown dtype %d", (int)dtype);
    if ((flags & ~RING_CALL_EXACT) != 0)
        return ring_error_set(RING_ERR_INVALID, "allreduce: unknown flags 0x%x", flags);
    if (count > ((size_t)1 << 40))
        return ring_error_set(RING_ERR_INVALID, "allreduce of %zu elements is too large", count);
    ring_comm_lock(comm);
    status = ring_request_next(comm, &req);
    if (status == RING_OK) {
        req->coll = RING_COLL_ALLREDUCE;
        req->sendbuf = sendbuf;
        req->recvbuf = recvbuf;
        req->count = count;
        req->dtype = dtype;
        req->op = op;
        req->tensor_id = tensor_id;
        req->exact = (flags & RING_CALL_EXACT) != 0;
        status = ring_request_push(comm, req, req_p);
    }
    ring_comm_unlock(comm);
    return status;
}

/* The message for a finished request that failed. */
static ring_status_t request_error(const ring_request_t *req)
{
    if (req->status == RING_ERR_NONFINITE)
        return ring_error_set(RING_ERR_NONFINITE,
                              "round %llu (tensor id %u): the inputs of at least one peer hold "
                              "inf or NaN, or a sum overflowed%s; the result is not finite",
                              (unsigned long long)req->round, req->tensor_id,
                              req->comm->codec == RING_CODEC_FP16 && !req->comm->fp16_scaling
                                  ? " (fp16 without scaling overflows above 65504: try "
                                    "--fp16-scaling on)"
                                  : "");
    return ring_error_copy(req->status, req->comm->error_msg);
}

ring_status_t ring_request_test(ring_request_t *req, int *done_p)
{
    ring_status_t status = RING_OK;

    if (req == NULL || done_p == NULL || !req->in_use)
        return ring_error_set(RING_ERR_INVALID, "ring_request_test: not a live request");
    ring_comm_lock(req->comm);
    if (!req->done && req->comm->progress == NULL)
        (void)ring_comm_progress(req->comm);
    *done_p = req->done;
    if (req->done && req->status != RING_OK)
        status = request_error(req);
    ring_comm_unlock(req->comm);
    return status;
}

ring_status_t ring_request_wait(ring_request_t *req)
{
    ring_comm_t *comm;
    ring_status_t status;

    if (req == NULL || !req->in_use)
        return ring_error_set(RING_ERR_INVALID, "ring_request_wait: not a live request");
    comm = req->comm;
    ring_comm_lock(comm);
    /* the progress thread drives it; else earlier requests run first, and
     * waiting on this one drives them too */
    if (ring_progress_wait(comm, req) == 0)
        status = req->status;
    else
        status = ring_comm_wait_until(comm, req);
    req->in_use = 0;
    /* release finished requests from the head, in order */
    while (comm->req_count > 0 && !comm->reqs[comm->req_head].in_use) {
        comm->req_head = (comm->req_head + 1) % RING_MAX_REQUESTS;
        comm->req_count--;
    }
    if (status != RING_OK)
        status = request_error(req);
    ring_comm_unlock(comm);
    return status;
}

ring_status_t ring_allreduce(ring_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                             ring_dtype_t dtype, ring_op_t op)
{
    ring_request_t *req;

    RING_CHECK(ring_allreduce_start(comm, sendbuf, recvbuf, count, dtype, op, 0, &req));
    return ring_request_wait(req);
}

ring_status_t ring_comm_get_stats(const ring_comm_t *comm, ring_comm_stats_t *stats_p)
{
    if (comm == NULL || stats_p == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_get_stats: NULL argument");
    ring_comm_lock((ring_comm_t *)comm);
    *stats_p = comm->stats;
    ring_comm_unlock((ring_comm_t *)comm);
    return RING_OK;
}

const char *ring_version(void)
{
    return PACKAGE_VERSION;
}
