/*
 * verbs_qp.c - an endpoint's RC queue pair: its completion queue, its two
 * registered regions (the receive slots the peer writes into, the bounce
 * slots our writes read from), and one function per state transition,
 * RESET -> INIT -> RTR -> RTS, as the verbs spec lays them out.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcp.h"
#include "verbs_int.h"

int vb_qp_create(ring_tp_ep_t *ep, char *err, size_t errlen)
{
    vb_dev_t *dev = &ep->tp->dev;
    size_t bytes = (size_t)VB_SLOTS * VB_SLOT_BYTES;
    struct ibv_qp_init_attr qa;
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

    ep->cq = ibv_create_cq(dev->ctx, VB_SQ_DEPTH + VB_SLOTS + VB_RQ_EXTRA, ep, ep->tp->channel,
                           0);
    if (ep->cq == NULL) {
        snprintf(err, errlen, "cannot create a completion queue on %s: %m", dev->name);
        return -1;
    }
    if (posix_memalign((void **)&ep->rx_slots, 4096, bytes) != 0 ||
        posix_memalign((void **)&ep->tx_bounce, 4096, bytes) != 0) {
        snprintf(err, errlen, "out of memory for RDMA slots (2 x %zu bytes)", bytes);
        return -1;
    }
    memset(ep->rx_slots, 0, bytes);
    ep->rx_mr = ibv_reg_mr(dev->pd, ep->rx_slots, bytes, access);
    ep->tx_mr = ep->rx_mr != NULL ? ibv_reg_mr(dev->pd, ep->tx_bounce, bytes, access) : NULL;
    if (ep->tx_mr == NULL) {
        snprintf(err, errlen, "cannot register %zu bytes with %s: %m (is `ulimit -l` too small "
                 "for locked memory?)", bytes, dev->name);
        return -1;
    }
    memset(&qa, 0, sizeof(qa));
    qa.send_cq = ep->cq;
    qa.recv_cq = ep->cq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = VB_SQ_DEPTH;
    qa.cap.max_recv_wr = VB_SLOTS + VB_RQ_EXTRA;
    qa.cap.max_send_sge = RING_TP_IOV_MAX; /* a fragment: registered pieces and bounce */
    qa.cap.max_recv_sge = 1;
    ep->qp = ibv_create_qp(dev->pd, &qa);
    if (ep->qp == NULL) {
        snprintf(err, errlen, "cannot create an RC queue pair on %s: %m", dev->name);
        return -1;
    }
    return 0;
}

int vb_qp_to_init(ring_tp_ep_t *ep, char *err, size_t errlen)
{
    struct ibv_qp_attr a;

    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = ep->tp->dev.port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (ibv_modify_qp(ep->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                      IBV_QP_ACCESS_FLAGS) != 0) {
        snprintf(err, errlen, "QP 0x%x: RESET -> INIT failed: %m", ep->qp->qp_num);
        return -1;
    }
    return 0;
}

/* Ready to receive: where the peer's QP is, and the path MTU both ports allow. */
int vb_qp_to_rtr(ring_tp_ep_t *ep, char *err, size_t errlen)
{
    const vb_dev_t *dev = &ep->tp->dev;
    const vb_record_t *t = &ep->theirs;
    struct ibv_qp_attr a;

    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (enum ibv_mtu)(t->mtu < dev->mtu ? t->mtu : dev->mtu);
    a.dest_qp_num = t->qpn;
    a.rq_psn = t->psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12; /* 0.64 ms; the receive queue is never meant to run dry */
    a.ah_attr.port_num = dev->port;
    a.ah_attr.dlid = t->lid;
    if (dev->link_layer == 2 || t->link_layer == 2) {
        /* RoCE routes by GID: a global route header is mandatory */
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, t->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)dev->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    if (ibv_modify_qp(ep->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
        char gid[64];

        vb_gid_format(t->gid, gid, sizeof(gid));
        snprintf(err, errlen, "QP 0x%x: INIT -> RTR towards %s on %s (GID %s, QP 0x%x) "
                 "failed: %m", ep->qp->qp_num, t->dev_name,
                 ep->tp->boot_ops->ep_peer(ep->boot), gid, t->qpn);
        return -1;
    }
    return 0;
}

/* Ready to send: the retry settings decide how soon a dead peer is noticed. */
int vb_qp_to_rts(ring_tp_ep_t *ep, char *err, size_t errlen)
{
    struct ibv_qp_attr a;

    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = (uint8_t)ep->tp->params.ib_timeout;   /* 4.096 us x 2^timeout */
    a.retry_cnt = (uint8_t)ep->tp->params.ib_retry_count;
    a.rnr_retry = 7;                                   /* 7 = retry for ever */
    a.sq_psn = ep->mine.psn;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(ep->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                      IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
        snprintf(err, errlen, "QP 0x%x: RTR -> RTS failed: %m", ep->qp->qp_num);
        return -1;
    }
    return 0;
}

/* Receive WRs without buffers: a write with immediate only needs one to complete. */
int vb_qp_post_recvs(ring_tp_ep_t *ep, int n, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        struct ibv_recv_wr wr, *bad;

        memset(&wr, 0, sizeof(wr));
        wr.wr_id = VB_WR_RECV;
        if (ibv_post_recv(ep->qp, &wr, &bad) != 0) {
            snprintf(err, errlen, "QP 0x%x: posting a receive failed: %m", ep->qp->qp_num);
            return -1;
        }
    }
    return 0;
}

void vb_qp_destroy(ring_tp_ep_t *ep)
{
    if (ep->qp != NULL)
        ibv_destroy_qp(ep->qp);
    if (ep->tx_mr != NULL)
        ibv_dereg_mr(ep->tx_mr);
    if (ep->rx_mr != NULL)
        ibv_dereg_mr(ep->rx_mr);
    /* wait() acknowledges every CQ event as it reads it, so none block this */
    if (ep->cq != NULL)
        ibv_destroy_cq(ep->cq);
    free(ep->rx_slots);
    free(ep->tx_bounce);
    ep->qp = NULL;
    ep->cq = NULL;
    ep->rx_mr = ep->tx_mr = NULL;
    ep->rx_slots = ep->tx_bounce = NULL;
}
