/*
 * comm_open.c - a communicator's life: open (validate the config, find the
 * peers, connect the ring, autotune) and close (tell the neighbours, free).
 * It is the top of the library: it assembles bootstrap, core and diag, and
 * nothing below calls back into it. What a user does with an open
 * communicator is in requests.c.
 */
#include "ring_build.h"

#include <stdlib.h>
#include <string.h>

#include "allreduce.h"
#include "auth.h"
#include "autotune.h"
#include "codec_fit.h"
#include "codec_pipeline.h"
#include "collectives.h"
#include "comm_int.h"
#include "connect.h"
#include "direct.h"
#include "doctor.h"
#include "fail.h"
#include "fault_inject.h"
#include "hier.h"
#include "log.h"
#include "neighbour_probe.h"
#include "one_host.h"
#include "progress_thread.h"
#include "rd.h"
#include "rendezvous.h"
#include "ring_order.h"
#include "timeline.h"
#include "tp_lend.h"

static void comm_free(ring_comm_t *comm)
{
    ring_sub_linger(comm); /* after a failure: the ring's ABORT goes first */
    ring_rd_close(comm);   /* hook: rd.c's pairs */
    ring_direct_close(comm); /* hook: direct.c's segment */
    ring_hier_close(comm); /* hook: hier.c's two rings */
    ring_tl_close(comm); /* hook: timeline.c writes out what it buffered */
    ring_dev_comm_free(comm); /* hook: device.c, before the buffers it page-locked go */
    for (int c = 0; c < RING_MAX_CHANNELS; c++) {
        ring_channel_t *ch = &comm->channels[c];
        for (int s = 0; s < RING_MAX_STREAMS; s++) {
            if (ch->right[s] != NULL)
                comm->tp_ops->ep_close(ch->right[s]);
            if (ch->left[s] != NULL)
                comm->tp_ops->ep_close(ch->left[s]);
        }
        free(ch->stage);
        free(ch->cipher);
        ring_enc_channel_free(ch);
    }
    ring_enc_comm_free(comm);
    ring_coll_comm_free(comm);
    ring_doctor_free(comm);   /* hook: doctor.c's requests, after the endpoints are closed */
    ring_frame_macs_free(comm->auth.macs);
    if (comm->listener != NULL)
        comm->tp_ops->listener_close(comm->listener);
    ring_rendezvous_close(comm);
    if (comm->tp != NULL)
        comm->tp_ops->fini(comm->tp);
    for (int r = 0; comm->topo.hosts != NULL && r < comm->size; r++)
        free(comm->topo.hosts[r]);
    free(comm->topo.hosts);
    free(comm->topo.order);
    free(comm->topo.peers);
    free(comm->elastic.parent);
    ring_probe_free(comm->elastic.probe); /* after the endpoints it listened on */
    ring_config_free(&comm->cfg);
    free(comm);
}

/* The peer list the user gave: each rank's host is its entry's host. */
static ring_status_t comm_static_peers(ring_comm_t *comm)
{
    const ring_config_t *cfg = &comm->cfg;

    RING_CHECK(ring_peers_parse(cfg->peers, cfg->world_size, cfg->port_lo, cfg->port_hi,
                                &comm->topo.peers));
    comm->topo.hosts = calloc((size_t)comm->size, sizeof(*comm->topo.hosts));
    if (comm->topo.hosts == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %d peers", comm->size);
    for (int r = 0; r < comm->size; r++)
        if ((comm->topo.hosts[r] = strdup(comm->topo.peers[r].host)) == NULL)
            return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %d peers", comm->size);
    return RING_OK;
}

/* This peer's place on the ring and its neighbours (--ring-order). */
static ring_status_t comm_place(ring_comm_t *comm)
{
    comm->topo.order = malloc((size_t)comm->size * sizeof(*comm->topo.order));
    if (comm->topo.order == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %d peers", comm->size);
    if (comm->cfg.ring_order == RING_CFG_ORDER_RANK)
        ring_order_by_rank(comm->size, comm->topo.order);
    else if (ring_order_by_host((const char *const *)comm->topo.hosts, comm->size,
                                comm->topo.order) != 0)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %d peers", comm->size);
    for (int p = 0; p < comm->size; p++)
        if (comm->topo.order[p] == comm->rank)
            comm->topo.pos = p;
    comm->topo.left_rank = comm->topo.order[(comm->topo.pos + comm->size - 1) % comm->size];
    comm->topo.right_rank = comm->topo.order[(comm->topo.pos + 1) % comm->size];
    ring_order_describe((const char *const *)comm->topo.hosts, comm->topo.order, comm->size,
                        comm->topo.order_desc, sizeof(comm->topo.order_desc));
    ring_peer_format(&comm->topo.peers[comm->topo.left_rank], comm->topo.left_addr,
                     sizeof(comm->topo.left_addr));
    ring_peer_format(&comm->topo.peers[comm->topo.right_rank], comm->topo.right_addr,
                     sizeof(comm->topo.right_addr));
    ring_log(RING_LOG_INFO, "ring order (%s): %s",
             comm->cfg.ring_order == RING_CFG_ORDER_RANK ? "rank" : "host", comm->topo.order_desc);
    return RING_OK;
}

/* --transport's choice, as the transport registry knows it (auto: it chooses) */
static const ring_tp_kind_t tp_kinds[] = {
    [RING_CFG_TRANSPORT_AUTO] = RING_TP_NONE, [RING_CFG_TRANSPORT_TCP] = RING_TP_TCP,
    [RING_CFG_TRANSPORT_SHM] = RING_TP_SHM, [RING_CFG_TRANSPORT_VERBS] = RING_TP_VERBS};

static ring_status_t comm_setup(ring_comm_t *comm, const ring_config_t *cfg)
{
    ring_tp_params_t params = {.sockbuf = cfg->tcp_sockbuf,
                               .rate_limit_bps = cfg->rate_limit_bps,
                               .rank = cfg->rank,
                               .ib_dev = cfg->ib_dev,
                               .gid_index = cfg->gid_index,
                               .ib_timeout = cfg->ib_timeout,
                               .ib_retry_count = cfg->ib_retry_count,
                               .host_id = cfg->host_id};
    int level = (int)cfg->log_level;
    char why[512], one_host[300], word[16];

    RING_CHECK(ring_config_validate(cfg));
    RING_CHECK(ring_config_copy(&comm->cfg, cfg));
    RING_CHECK(ring_auth_key_load(cfg, &comm->auth.key));
    ring_comm_tp_lend(comm, &params);
    comm->auth.encrypt = cfg->auth == RING_CFG_AUTH_ENCRYPT;
    comm->auth.frames = cfg->auth == RING_CFG_AUTH_FRAMES || comm->auth.encrypt;
    if (comm->auth.frames && !comm->auth.key.on)
        return ring_error_set(RING_ERR_INVALID, "--auth %s (RING_AUTH) needs the job's secret: "
                              "give --secret-file FILE or RING_SECRET_FILE (ring-launch makes one)",
                              comm->auth.encrypt ? "encrypt" : "frames");
    comm->auth.hdr_bytes = RING_FRAME_BYTES + (comm->auth.frames ? RING_FRAME_TRAILER_BYTES : 0);
    if (comm->auth.frames && (comm->auth.macs = ring_frame_macs_new()) == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for --auth frames");
    if (level > 0)
        ring_log_set_level((ring_log_level_t)level);
    ring_log_set_rank(cfg->rank);
    comm->rank = cfg->rank;
    comm->size = cfg->world_size;
    comm->nchannels = cfg->channels;
    if (cfg->autotune && cfg->world_size > 1) {
        if (ring_autotune_parse(cfg->autotune_chunks, cfg->autotune_channels, &comm->tune.space,
                                why, sizeof(why)) != 0)
            return ring_error_set(RING_ERR_INVALID, "%s", why);
        /* connect every channel and size the buffers for every chunk a candidate uses */
        comm->tune.on = 1;
        comm->nchannels = comm->tune.space.max_channels;
        comm->cfg.chunk_bytes = comm->tune.space.max_chunk;
    }
    /* --rd-fit auto: the autotuner measures the algorithms' limits too */
    if (comm->cfg.rd_fit != 0 && comm->cfg.rd_fit != 1)
        comm->cfg.rd_fit = comm->tune.on;
    comm->nstreams = cfg->tcp_streams;
    /* auto: fp16 until codec_fit.c has timed it against fp32 */
    comm->enc.codec = cfg->codec == RING_CFG_CODEC_FP16 || cfg->codec == RING_CFG_CODEC_AUTO
                          ? RING_CODEC_FP16
                      : cfg->codec == RING_CFG_CODEC_BF16 ? RING_CODEC_BF16
                                                          : RING_CODEC_NONE;
    comm->enc.fp16_scaling = cfg->fp16_scaling != 0;
    comm->enc.lz4_mode = cfg->lz4 == RING_CFG_LZ4_ON ? 1 : cfg->lz4 == RING_CFG_LZ4_AUTO ? 2 : 0;
    comm->enc.error_feedback = cfg->error_feedback != 0;
    comm->enc.kops = ring_codec_ops();
    (void)ring_config_get(cfg, "codec", word, sizeof(word));
    ring_log(RING_LOG_INFO, "codec %s, kernels %s", word, ring_codec_ops_choice());
    RING_CHECK(ring_tl_open(comm)); /* hook: timeline.c, --timeline (a bad path fails here) */
    if (comm->size == 1) {
        RING_CHECK(ring_coll_comm_alloc(comm));
        comm->tp_ops = ring_tp_find("tcp");
        comm->topo.left_rank = comm->topo.right_rank = comm->topo.pos = 0;
        return RING_OK; /* a ring of one needs no peers, no sockets and no RDMA device */
    }
    (void)ring_config_one_host(cfg, one_host, sizeof(one_host));
    params.one_host_why = one_host;
    comm->tp_ops = ring_tp_choose(tp_kinds[cfg->transport], &params, why, sizeof(why));
    if (comm->tp_ops == NULL) {
        (void)ring_config_get(cfg, "transport", word, sizeof(word));
        return ring_error_set(RING_ERR_UNSUPPORTED, "transport '%s' is not in this build (it has: %s)",
                              word, ring_tp_names());
    }
    /* auto with RDMA: peers on this host still meet in shared memory (verbs.c) */
    params.verbs_local_shm = cfg->transport == RING_CFG_TRANSPORT_AUTO &&
                             comm->tp_ops->kind == RING_TP_VERBS;
    comm->tp_ops = ring_fault_wrap(comm->tp_ops); /* RING_FAULT, tests only: fault_inject.c */
    if (why[0] != '\0' || params.verbs_local_shm)
        ring_log(RING_LOG_INFO, "transport auto: %s%s%s",
                 comm->tp_ops->kind == RING_TP_SHM
                     ? "shm (shared memory with peers on this host, tcp to others)"
                 : !params.verbs_local_shm ? "tcp"
                 : cfg->rate_limit_bps > 0
                     ? "verbs (RDMA to every peer: shared memory would ignore --rate-limit)"
                     : "verbs (RDMA to other hosts, shared memory with peers on this host)",
                 why[0] != '\0' ? ", because " : "", why);
    for (int c = 0; c < comm->nchannels; c++) {
        comm->channels[c].index = c;
        RING_CHECK(ring_enc_channel_alloc(comm, &comm->channels[c]));
        comm->channels[c].stage = malloc(RING_WINDOW * comm->cfg.chunk_bytes);
        if (comm->auth.encrypt)
            comm->channels[c].cipher = malloc(RING_WINDOW * comm->cfg.chunk_bytes);
        if (comm->channels[c].stage == NULL ||
            (comm->auth.encrypt && comm->channels[c].cipher == NULL))
            return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %d staging chunks of %zu "
                                  "bytes", RING_WINDOW, comm->cfg.chunk_bytes);
    }
    RING_CHECK(comm->tp_ops->init(&params, &comm->tp));
    if (ring_config_uses_rendezvous(cfg))
        RING_CHECK(ring_rendezvous(comm)); /* --elastic: or it is admitted to a running ring, */
    if (!ring_config_uses_rendezvous(cfg) || comm->rdzv.joined) /* which gave it a peer list */
        RING_CHECK(comm_static_peers(comm));
    RING_CHECK(ring_coll_comm_alloc(comm)); /* sized by the ring: a joiner learnt it just now */
    RING_CHECK(comm_place(comm));
    /* frame headers live in the channels' slots: registered, they need no copy either */
    if (comm->tp_ops->reg_mem(comm->tp, comm->channels, sizeof(comm->channels)) != RING_OK)
        ring_log(RING_LOG_DEBUG, "%s", ring_last_error());
    RING_CHECK(ring_connect_ring(comm));
    ring_channel_post_back(comm, &comm->channels[0]);
    ring_rendezvous_mark_running(comm); /* --elastic: a peer started later joins it */
    if (comm->tune.on)
        RING_CHECK(ring_autotune(comm));
    /* hook: hier.c, --hierarchical; it opens its rings with what we lend it */
    RING_CHECK(ring_hier_open(comm, ring_comm_open, ring_comm_close));
    /* hook: direct.c, --algo: one shared segment when every peer is on this host */
    RING_CHECK(ring_direct_open(comm));
    /* hook: rd.c, --algo: its pairs, the same way (not needed where direct runs) */
    if (comm->algo.direct == NULL)
        RING_CHECK(ring_rd_open(comm, ring_comm_open, ring_comm_close));
    /* rd_fit.c, --rd-fit: where rd stops paying on this ring, measured */
    if (comm->algo.rd != NULL && comm->cfg.algo == RING_CFG_ALGO_AUTO &&
        comm->cfg.rd_fit)
        RING_CHECK(ring_rd_fit(comm));
    /* codec_fit.c: --codec auto picks fp16 or fp32 by measuring both */
    if (comm->cfg.codec == RING_CFG_CODEC_AUTO && comm->size > 1) {
        ring_codec_fit_t fit;

        RING_CHECK(ring_codec_fit(comm, &fit));
        RING_CHECK(ring_direct_rebase(comm)); /* its calls ran there, numbered as set-up */
        comm->enc.fit_fp32_us = fit.fp32_us;
        comm->enc.fit_codec_us = fit.codec_us;
        comm->enc.fit_bytes = fit.bytes;
        if (!fit.codec_pays)
            comm->enc.codec = RING_CODEC_NONE;
    }
    /* their set-up allgathers were not the user's: the user's first call is round 0 */
    comm->requests.next_round = 0;
    memset(&comm->stats, 0, sizeof(comm->stats));
    comm->stats.rd_max_bytes = ring_rd_max_bytes(comm);
    comm->stats.rh_max_bytes = ring_rh_max_bytes(comm);
    comm->stats.codec = (uint64_t)comm->enc.codec;
    comm->stats.codec_fit_bytes = comm->enc.fit_bytes;
    comm->stats.codec_fit_fp32_us = comm->enc.fit_fp32_us;
    comm->stats.codec_fit_codec_us = comm->enc.fit_codec_us;
    comm->open_done = 1;
    if (comm->fail.abort_deferred_valid) /* the first call fails with it */
        (void)ring_comm_fail_from_frame(comm, &comm->fail.abort_deferred, comm->topo.right_rank);
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
    comm->fail.mismatch.rank = -1;
    status = comm_setup(comm, cfg);
    /* a joiner: the members check the new ring with a barrier (elastic/grow.c) */
    if (status == RING_OK && comm->rdzv.joined)
        status = ring_barrier(comm);
    if (status == RING_OK && comm->size > 1 && cfg->progress_thread)
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
    if (comm->size > 1 && comm->tp != NULL && comm->fail.error == RING_OK)
        ring_comm_send_close(comm);
    comm_free(comm);
}
