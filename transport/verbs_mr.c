/*
 * verbs_mr.c - memory the caller registered (ring_comm_register): a table
 * of regions looked up for every fragment, so that registered bytes leave
 * straight from the caller's memory instead of through the bounce slots.
 * Host memory is registered with ibv_reg_mr; CUDA device memory through a
 * dma-buf with ibv_reg_dmabuf_mr (GPUDirect RDMA: the NIC reads the GPU),
 * told apart and exported by the engine's hooks (params.hooks: without
 * them every buffer is host memory).
 *
 * Why registration is explicit, not an automatic cache keyed by address: a
 * buffer freed and another allocated at the same address would hit a stale
 * registration that still pins the old pages, and RDMA would silently send
 * the old bytes. NCCL asks for ncclCommRegister for the same reason.
 */
#include "ring_build.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "verbs_int.h"

static const int vb_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

/* GPUDirect: device memory as a dma-buf; NULL (errno unchanged) when it cannot be done. */
static struct ibv_mr *vb_reg_device(vb_tp_t *tp, void *addr, size_t bytes, char *why,
                                    size_t whylen)
{
    const ring_tp_hooks_t *h = &tp->params.hooks;
    int fd;
    uintptr_t base;
    size_t len;
    struct ibv_mr *mr;

    if (ring_ibv.reg_dmabuf_mr == NULL) {
        snprintf(why, whylen, "this libibverbs has no ibv_reg_dmabuf_mr (rdma-core 34 or "
                 "later has it)");
        return NULL;
    }
    if (h->dmabuf_fd == NULL || h->dmabuf_fd(h->ctx, addr, bytes, &fd, &base, &len) != 0) {
        snprintf(why, whylen, "the CUDA driver cannot export it as a dma-buf (driver older "
                 "than 11.7, or no dma-buf support in the kernel)");
        return NULL;
    }
    mr = ibv_reg_dmabuf_mr(tp->dev.pd, (uint64_t)((uintptr_t)addr - base), bytes,
                           (uint64_t)(uintptr_t)addr, fd, vb_access);
    if (mr == NULL)
        snprintf(why, whylen, "ibv_reg_dmabuf_mr on %s failed: %m (does the NIC driver "
                 "support dma-buf?)", tp->dev.name);
    close(fd); /* the MR holds its own reference to the dma-buf */
    return mr;
}

ring_status_t vb_reg_mem(ring_tp_t *tp_, void *addr, size_t bytes)
{
    vb_tp_t *tp = (vb_tp_t *)tp_;
    const ring_tp_hooks_t *h = &tp->params.hooks;
    vb_region_t *r;
    char why[256] = "";
    int device = h->is_device_ptr != NULL && h->is_device_ptr(h->ctx, addr);

    if (addr == NULL || bytes == 0)
        return ring_error_set(RING_ERR_INVALID, "cannot register %zu bytes at %p", bytes, addr);
    if (vb_region_find(tp, addr, bytes) != NULL)
        return RING_OK; /* already covered */
    if (tp->nregions == VB_REGIONS_MAX)
        return ring_error_set(RING_ERR_NO_RESOURCE, "verbs: %d registered buffers already "
                              "(deregister some first)", VB_REGIONS_MAX);
    r = &tp->regions[tp->nregions];
    r->mr = device ? vb_reg_device(tp, addr, bytes, why, sizeof(why))
                   : ibv_reg_mr(tp->dev.pd, addr, bytes, vb_access);
    if (r->mr == NULL) {
        if (!device)
            snprintf(why, sizeof(why), "ibv_reg_mr failed: %m (is `ulimit -l` too small?)");
        return ring_error_set(RING_ERR_NO_RESOURCE, "verbs: cannot register %zu bytes of %s "
                              "memory at %p with %s: %s", bytes, device ? "CUDA device" : "host",
                              addr, tp->dev.name, why);
    }
    r->addr = (uintptr_t)addr;
    r->len = bytes;
    r->device = device;
    tp->nregions++;
    ring_log(RING_LOG_DEBUG, "verbs: registered %zu bytes of %s memory at %p (lkey 0x%x)", bytes,
             device ? "CUDA device" : "host", addr, r->mr->lkey);
    return RING_OK;
}

ring_status_t vb_dereg_mem(ring_tp_t *tp_, void *addr)
{
    vb_tp_t *tp = (vb_tp_t *)tp_;

    for (int i = 0; i < tp->nregions; i++)
        if (tp->regions[i].addr == (uintptr_t)addr) {
            (void)ibv_dereg_mr(tp->regions[i].mr);
            tp->regions[i] = tp->regions[--tp->nregions];
            return RING_OK;
        }
    return ring_error_set(RING_ERR_INVALID, "%p was not registered with this communicator",
                          addr);
}

const vb_region_t *vb_region_find(const vb_tp_t *tp, const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p;

    for (int i = 0; i < tp->nregions; i++) {
        const vb_region_t *r = &tp->regions[i];

        if (a >= r->addr && a - r->addr <= r->len && len <= r->len - (a - r->addr))
            return r;
    }
    return NULL;
}

void vb_regions_free(vb_tp_t *tp)
{
    for (int i = 0; i < tp->nregions; i++)
        (void)ibv_dereg_mr(tp->regions[i].mr);
    tp->nregions = 0;
}
