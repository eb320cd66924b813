/*
 * tp_lend.c - what the engine lends its transport (ring_tp_hooks_t in
 * transport.h), so that no transport includes a file above its layer: the
 * job's secret as the connection guard of the verbs bootstrap
 * (src/bootstrap/auth_guard.c), the engine's own first bytes recognised
 * where a verbs record was due, and CUDA device memory for registration
 * (kernels/cuda/ring_cuda.h: GPUDirect RDMA through a dma-buf).
 */
#include "ring_build.h"

#include <string.h>

#include "comm_int.h"
#include "cuda/ring_cuda.h"
#include "le.h"
#include "tp_lend.h"

/* A peer's bootstrap started with a ringd hello, a shared-memory offer or an
 * authentication challenge: it runs over tcp, or auto, or with a secret this
 * peer lacks. */
static const char *lend_foreign_bytes(void *ctx, const unsigned char first[4], size_t bytes)
{
    uint32_t magic = le_get32(first);

    if (magic == RING_HELLO_MAGIC)
        return "runs ringd over the tcp transport, this peer over verbs: every peer needs the "
               "same --transport (RING_TRANSPORT)";
    if (bytes >= 4 && memcmp(first, "RSHO", 4) == 0) /* shm.c's offer: an shm bootstrap */
        return "offers shared memory first (--transport shm, or auto, which runs verbs with "
               "shared memory within a host), this peer runs --transport verbs alone: every "
               "peer needs the same --transport (RING_TRANSPORT)";
    /* ctx is this peer's party when it has a secret (ring_auth_guard_lend):
     * then a challenge is what it expects */
    if (bytes >= 4 && magic == RING_AUTH_MAGIC && ctx == NULL)
        return "asked this peer to prove the job's secret, and this peer has none: give every "
               "peer the same --secret-file (RING_SECRET_FILE)";
    return NULL;
}

static int lend_is_device_ptr(void *ctx, const void *p)
{
    return ring_cuda_is_device_ptr(p);
}

static int lend_dmabuf_fd(void *ctx, const void *p, size_t bytes, int *fd_p, uintptr_t *base_p,
                          size_t *len_p)
{
    return ring_cuda_dmabuf_fd(p, bytes, fd_p, base_p, len_p);
}

void ring_comm_tp_lend(ring_comm_t *comm, ring_tp_params_t *params)
{
    /* the guard's context is this peer's party: its job and rank now, the rank
     * it calls once the ring's order is known (connect.c); the other hooks need
     * none */
    ring_auth_party_init(&comm->auth.boot_party, &comm->auth.key, comm->cfg.job_id,
                         RING_AUTH_FOR_VERBS_BOOT, comm->cfg.rank, RING_AUTH_NO_RANK);
    ring_auth_guard_lend(&comm->auth.boot_party, &params->hooks);
    params->hooks.foreign_bytes = lend_foreign_bytes;
    params->hooks.is_device_ptr = lend_is_device_ptr;
    params->hooks.dmabuf_fd = lend_dmabuf_fd;
}
