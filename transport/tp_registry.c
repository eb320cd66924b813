/*
 * tp_registry.c - the transports compiled into this build, with every missing
 * operation filled by a default that returns RING_ERR_UNSUPPORTED (memory
 * registration: RING_OK, it only saves copies), so the engine never tests
 * for NULL; and the choice --transport auto makes. The only place (besides
 * kernel dispatch) where a RING_HAVE_* macro appears.
 */
#include "ring_build.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "transport.h"
#include "shm.h"
#include "tcp.h"
#if RING_HAVE_VERBS
#include "verbs.h"
#endif

static ring_status_t default_init(const ring_tp_params_t *params, ring_tp_t **tp_p)
{
    return RING_ERR_UNSUPPORTED;
}

static void default_fini(ring_tp_t *tp)
{
}

static ring_status_t default_listen(ring_tp_t *tp, const char *host, int port,
                                    ring_tp_listener_t **l_p)
{
    return RING_ERR_UNSUPPORTED;
}

static ring_status_t default_accept(ring_tp_listener_t *l, ring_tp_ep_t **ep_p)
{
    return RING_ERR_UNSUPPORTED;
}

static void default_listener_close(ring_tp_listener_t *l)
{
}

static int default_listener_port(const ring_tp_listener_t *l)
{
    return -1;
}

static ring_status_t default_connect(ring_tp_t *tp, const char *host, int port,
                                     ring_tp_ep_t **ep_p)
{
    return RING_ERR_UNSUPPORTED;
}

static ring_status_t default_post(ring_tp_ep_t *ep, ring_tp_req_t *req)
{
    return RING_ERR_UNSUPPORTED;
}

static int default_progress(ring_tp_t *tp)
{
    return 0;
}

static void default_wait(ring_tp_t *tp, int timeout_ms)
{
}

static const char *default_ep_peer(const ring_tp_ep_t *ep)
{
    return "?";
}

static void default_ep_close(ring_tp_ep_t *ep)
{
}

static const char *default_ep_error(const ring_tp_ep_t *ep)
{
    return "";
}

/* registration is an optimisation: a transport without it sends the same bytes */
static ring_status_t default_reg_mem(ring_tp_t *tp, void *addr, size_t bytes)
{
    return RING_OK;
}

static ring_status_t default_dereg_mem(ring_tp_t *tp, void *addr)
{
    return RING_OK;
}

static const ring_tp_ops_t tp_defaults = {
    .size = sizeof(ring_tp_ops_t),
    .name = "none",
    .init = default_init,
    .fini = default_fini,
    .listen = default_listen,
    .accept = default_accept,
    .listener_close = default_listener_close,
    .listener_port = default_listener_port,
    .connect = default_connect,
    .post_send = default_post,
    .post_recv = default_post,
    .progress = default_progress,
    .wait = default_wait,
    .ep_peer = default_ep_peer,
    .ep_close = default_ep_close,
    .ep_error = default_ep_error,
    .reg_mem = default_reg_mem,
    .dereg_mem = default_dereg_mem,
};

static const ring_tp_ops_t *const tp_builtin[] = {
    &ring_tcp_ops,
    &ring_shm_ops,
#if RING_HAVE_VERBS
    &ring_verbs_ops,
#endif
    NULL,
};

static ring_tp_ops_t tp_filled[sizeof(tp_builtin) / sizeof(tp_builtin[0])];
static pthread_once_t tp_filled_once = PTHREAD_ONCE_INIT;

#define TP_FILL(_dst, _src, _op) ((_dst)->_op = (_src)->_op != NULL ? (_src)->_op : tp_defaults._op)

static void tp_fill_defaults(void)
{
    for (size_t i = 0; tp_builtin[i] != NULL; i++) {
        const ring_tp_ops_t *src = tp_builtin[i];
        ring_tp_ops_t *dst = &tp_filled[i];

        dst->size = sizeof(*dst);
        dst->name = src->name;
        dst->kind = src->kind;
        TP_FILL(dst, src, init);
        TP_FILL(dst, src, fini);
        TP_FILL(dst, src, listen);
        TP_FILL(dst, src, accept);
        TP_FILL(dst, src, listener_close);
        TP_FILL(dst, src, listener_port);
        TP_FILL(dst, src, connect);
        TP_FILL(dst, src, post_send);
        TP_FILL(dst, src, post_recv);
        TP_FILL(dst, src, progress);
        TP_FILL(dst, src, wait);
        TP_FILL(dst, src, ep_peer);
        TP_FILL(dst, src, ep_close);
        TP_FILL(dst, src, ep_error);
        TP_FILL(dst, src, reg_mem);
        TP_FILL(dst, src, dereg_mem);
    }
}

const ring_tp_ops_t *ring_tp_find(const char *name)
{
    pthread_once(&tp_filled_once, tp_fill_defaults);
    for (size_t i = 0; tp_builtin[i] != NULL; i++)
        if (strcmp(tp_filled[i].name, name) == 0)
            return &tp_filled[i];
    return NULL;
}

const ring_tp_ops_t *ring_tp_find_kind(ring_tp_kind_t kind)
{
    pthread_once(&tp_filled_once, tp_fill_defaults);
    for (size_t i = 0; tp_builtin[i] != NULL; i++)
        if (kind != RING_TP_NONE && tp_filled[i].kind == kind)
            return &tp_filled[i];
    return NULL;
}

const char *ring_tp_names(void)
{
    return RING_HAVE_VERBS ? "tcp, shm, verbs" : "tcp, shm";
}

const ring_tp_ops_t *ring_tp_choose(ring_tp_kind_t asked, const ring_tp_params_t *params,
                                    char *why, size_t whylen)
{
    why[0] = '\0';
    if (asked != RING_TP_NONE)
        return ring_tp_find_kind(asked);
#if RING_HAVE_VERBS
    /* within one host shared memory beats a loop through the HCA (NCCL, Open MPI) */
    if (params->one_host_why != NULL && params->one_host_why[0] != '\0' &&
        params->rate_limit_bps <= 0) {
        snprintf(why, whylen, "%s: shared memory is faster there than the RDMA device (use "
                 "--transport verbs to run it)", params->one_host_why);
        return ring_tp_find_kind(RING_TP_SHM);
    }
    if (ring_verbs_probe(params, why, whylen))
        return ring_tp_find_kind(RING_TP_VERBS);
#else
    snprintf(why, whylen, "this build has no verbs transport (configure found no libibverbs)");
#endif
    /* a bandwidth cap is tcp's (token_bucket.c): shared memory would ignore it */
    if (params->rate_limit_bps > 0)
        return ring_tp_find_kind(RING_TP_TCP);
    return ring_tp_find_kind(RING_TP_SHM);
}
