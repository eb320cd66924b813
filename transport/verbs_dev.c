/*
 * verbs_dev.c - which RDMA device, port and GID this process uses.
 *
 * --ib-dev / RING_IB_HCA takes NCCL_IB_HCA's syntax: a comma list of
 * NAME[:PORT]; names are prefixes ("mlx5" matches mlx5_0 and mlx5_1)
 * unless the list starts with '=', and a leading '^' selects every device
 * but the listed ones. Among the ACTIVE ports that match, rank r takes the
 * (r mod k)-th, so ranks sharing a host spread over its NICs. The GID, on
 * Ethernet (RoCE), is --gid-index or else the first RoCE v2 GID holding an
 * IPv4 address (::ffff:a.b.c.d), which routes over UDP/IP like the
 * bootstrap connection; on InfiniBand the LID routes and GID 0 is kept.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verbs_hca.h"
#include "verbs_int.h"

static int gid_is_ipv4_mapped(const uint8_t *g)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    return memcmp(g, prefix, sizeof(prefix)) == 0;
}

static int vb_gid_is_zero(const uint8_t *g)
{
    for (int i = 0; i < 16; i++)
        if (g[i] != 0)
            return 0;
    return 1;
}

/* The GID for RoCE: the requested index, or the best the table offers. */
static int vb_pick_gid(vb_dev_t *dev, const struct ibv_port_attr *pa, int want, char *why,
                    size_t whylen)
{
    int best = -1, best_score = 0;

    if (want >= 0) {
        union ibv_gid gid;

        if (want >= pa->gid_tbl_len || ibv_query_gid(dev->ctx, dev->port, want, &gid) != 0 ||
            vb_gid_is_zero(gid.raw)) {
            snprintf(why, whylen, "%s port %u has no GID at index %d (--gid-index; its table "
                     "has %d entries: see `ibv_devinfo -v`)", dev->name, dev->port, want,
                     pa->gid_tbl_len);
            return -1;
        }
        dev->gid_index = want;
        memcpy(dev->gid, gid.raw, 16);
        return 0;
    }
    for (int i = 0; i < pa->gid_tbl_len; i++) {
        struct ibv_gid_entry e;
        int score;

        if (ibv_query_gid_ex(dev->ctx, dev->port, (uint32_t)i, &e, 0) != 0 ||
            vb_gid_is_zero(e.gid.raw))
            continue;
        /* RoCE v2 with an IPv4 address, then any RoCE v2, then anything */
        score = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? (gid_is_ipv4_mapped(e.gid.raw) ? 3 : 2) : 1;
        if (score > best_score) {
            best = i;
            best_score = score;
            memcpy(dev->gid, e.gid.raw, 16);
        }
    }
    if (best < 0) {
        snprintf(why, whylen, "%s port %u has no usable GID (does its network interface have "
                 "an IP address?)", dev->name, dev->port);
        return -1;
    }
    dev->gid_index = best;
    return 0;
}

/* Every way into the transport passes here (vb_dev_open): a host without libibverbs
 * is reported as one without a device, with the cause and the fix, so auto moves on. */
static int vb_dl_ready(char *why, size_t whylen)
{
    char e[1024];

    if (ring_verbs_dl_load(e, sizeof(e)) == 0)
        return 0;
    snprintf(why, whylen, "verbs unavailable: %s", e);
    return -1;
}

typedef struct vb_candidate {
    int dev;
    int port;
} vb_candidate_t;

int vb_dev_open(const ring_tp_params_t *params, vb_dev_t *dev, char *why, size_t whylen)
{
    struct ibv_device **list;
    vb_hca_spec_t spec;
    vb_candidate_t cand[64];
    int ndev = 0, k = 0, seen_ports = 0, chosen;
    struct ibv_port_attr pa;
    char inactive[256] = "";

    memset(dev, 0, sizeof(*dev));
    if (vb_dl_ready(why, whylen) != 0)
        return -1;
    if (vb_hca_parse(params->ib_dev, &spec, why, whylen) != 0)
        return -1;
    list = ibv_get_device_list(&ndev);
    if (list == NULL || ndev == 0) {
        snprintf(why, whylen, "no RDMA device (ibv_get_device_list found none: no InfiniBand "
                 "or RoCE NIC, or its driver / the rdma_rxe module is not loaded)");
        if (list != NULL)
            ibv_free_device_list(list);
        return -1;
    }
    for (int d = 0; d < ndev && k < (int)(sizeof(cand) / sizeof(cand[0])); d++) {
        const char *name = ibv_get_device_name(list[d]);
        struct ibv_context *ctx = ibv_open_device(list[d]);
        struct ibv_device_attr da;

        if (ctx == NULL)
            continue;
        if (ibv_query_device(ctx, &da) == 0)
            for (int p = 1; p <= da.phys_port_cnt; p++) {
                if (!vb_hca_match(&spec, name, p) || ibv_query_port(ctx, (uint8_t)p, &pa) != 0)
                    continue;
                seen_ports++;
                if (pa.state == IBV_PORT_ACTIVE && k < (int)(sizeof(cand) / sizeof(cand[0])))
                    cand[k++] = (vb_candidate_t){d, p};
                else if (strlen(inactive) + strlen(name) + 24 < sizeof(inactive))
                    snprintf(inactive + strlen(inactive), sizeof(inactive) - strlen(inactive),
                             "%s%s:%d %s", inactive[0] ? ", " : "", name, p,
                             ibv_port_state_str(pa.state));
            }
        ibv_close_device(ctx);
    }
    if (k == 0) {
        if (seen_ports == 0)
            snprintf(why, whylen, "no RDMA port matches %s%s%s (%d device%s found)",
                     params->ib_dev[0] ? "--ib-dev " : "every port", params->ib_dev,
                     params->ib_dev[0] ? "" : " of the devices", ndev, ndev == 1 ? "" : "s");
        else
            snprintf(why, whylen, "no ACTIVE RDMA port (%s)", inactive);
        ibv_free_device_list(list);
        return -1;
    }
    chosen = params->rank >= 0 ? params->rank % k : 0;
    snprintf(dev->name, sizeof(dev->name), "%s", ibv_get_device_name(list[cand[chosen].dev]));
    dev->port = (uint8_t)cand[chosen].port;
    dev->ctx = ibv_open_device(list[cand[chosen].dev]);
    ibv_free_device_list(list);
    if (dev->ctx == NULL || ibv_query_port(dev->ctx, dev->port, &pa) != 0) {
        snprintf(why, whylen, "cannot open RDMA device %s: %m", dev->name);
        vb_dev_close(dev);
        return -1;
    }
    dev->link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? 2 : 1;
    dev->mtu = (uint8_t)pa.active_mtu;
    dev->lid = pa.lid;
    if (dev->link_layer == 2) {
        if (vb_pick_gid(dev, &pa, params->gid_index, why, whylen) != 0) {
            vb_dev_close(dev);
            return -1;
        }
    } else {
        union ibv_gid gid;

        dev->gid_index = params->gid_index >= 0 ? params->gid_index : 0;
        if (ibv_query_gid(dev->ctx, dev->port, dev->gid_index, &gid) == 0)
            memcpy(dev->gid, gid.raw, 16);
    }
    vb_gid_format(dev->gid, dev->gid_text, sizeof(dev->gid_text));
    dev->pd = ibv_alloc_pd(dev->ctx);
    if (dev->pd == NULL) {
        snprintf(why, whylen, "cannot allocate a protection domain on %s: %m", dev->name);
        vb_dev_close(dev);
        return -1;
    }
    return 0;
}

void vb_dev_close(vb_dev_t *dev)
{
    if (dev->pd != NULL)
        ibv_dealloc_pd(dev->pd);
    if (dev->ctx != NULL)
        ibv_close_device(dev->ctx);
    dev->pd = NULL;
    dev->ctx = NULL;
}
