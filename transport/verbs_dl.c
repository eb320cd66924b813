/*
 * verbs_dl.c - libibverbs through dlopen (verbs_dl.h says why): the table
 * of its functions, filled once, and the few verbs.h inlines redone over it.
 *
 * Symbols are looked up with the version a link against verbs.h would bind
 * (libibverbs keeps IBVERBS_1.0 compatibility versions of many functions,
 * with older structs), falling back to the unversioned name for a library
 * built without versions.
 */
#include "ring_build.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verbs_dl.h"

#define VB_DL_DEFAULT "libibverbs.so.1"
#define VB_DL_FIX "the verbs transport needs rdma-core's libibverbs1 and a provider (apt-get " \
                  "install libibverbs1 ibverbs-providers, or dnf install libibverbs)"

ring_ibv_fns_t ring_ibv;

typedef struct vb_dl_sym {
    const char *name;
    const char *version;
    size_t off;                /* where in ring_ibv */
    int optional;              /* newer than the oldest libibverbs we run on */
} vb_dl_sym_t;

#define VB_SYM(field, version, optional) \
    {"ibv_" #field, version, offsetof(ring_ibv_fns_t, field), optional}

static const vb_dl_sym_t vb_dl_syms[] = {
    VB_SYM(get_device_list, "IBVERBS_1.1", 0),
    VB_SYM(free_device_list, "IBVERBS_1.1", 0),
    VB_SYM(get_device_name, "IBVERBS_1.1", 0),
    VB_SYM(open_device, "IBVERBS_1.1", 0),
    VB_SYM(close_device, "IBVERBS_1.1", 0),
    VB_SYM(query_device, "IBVERBS_1.1", 0),
    VB_SYM(query_port, "IBVERBS_1.1", 0),
    VB_SYM(query_gid, "IBVERBS_1.1", 0),
    {"_ibv_query_gid_ex", "IBVERBS_1.11", offsetof(ring_ibv_fns_t, query_gid_ex), 1},
    VB_SYM(alloc_pd, "IBVERBS_1.1", 0),
    VB_SYM(dealloc_pd, "IBVERBS_1.1", 0),
    VB_SYM(reg_mr, "IBVERBS_1.1", 0),
    VB_SYM(reg_mr_iova2, "IBVERBS_1.8", 1),
    VB_SYM(reg_dmabuf_mr, "IBVERBS_1.12", 1),
    VB_SYM(dereg_mr, "IBVERBS_1.1", 0),
    VB_SYM(create_comp_channel, "IBVERBS_1.0", 0),
    VB_SYM(destroy_comp_channel, "IBVERBS_1.0", 0),
    VB_SYM(create_cq, "IBVERBS_1.1", 0),
    VB_SYM(destroy_cq, "IBVERBS_1.1", 0),
    VB_SYM(get_cq_event, "IBVERBS_1.1", 0),
    VB_SYM(ack_cq_events, "IBVERBS_1.1", 0),
    VB_SYM(create_qp, "IBVERBS_1.1", 0),
    VB_SYM(modify_qp, "IBVERBS_1.1", 0),
    VB_SYM(destroy_qp, "IBVERBS_1.1", 0),
    VB_SYM(port_state_str, "IBVERBS_1.1", 0),
    VB_SYM(wc_status_str, "IBVERBS_1.1", 0),
};

static pthread_once_t vb_dl_once = PTHREAD_ONCE_INIT;
static int vb_dl_status = -1;
static char vb_dl_why[1024];

static void vb_dl_load_once(void)
{
    const char *env = getenv("RING_IBVERBS_LIBRARY");
    const char *lib = env != NULL && env[0] != '\0' ? env : VB_DL_DEFAULT;
    char name[320];
    ring_ibv_fns_t fns;
    void *h;

    if (lib == env)
        snprintf(name, sizeof(name), "libibverbs (%.256s, from RING_IBVERBS_LIBRARY)", lib);
    else
        snprintf(name, sizeof(name), "%s", lib);
    memset(&fns, 0, sizeof(fns));
    /* RTLD_LOCAL: libibverbs's names stay out of the process's global scope */
    h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *e = dlerror();

        snprintf(vb_dl_why, sizeof(vb_dl_why), "%s could not be loaded (%s): %s", name,
                 e != NULL ? e : "dlopen failed", VB_DL_FIX);
        return;
    }
    for (size_t i = 0; i < sizeof(vb_dl_syms) / sizeof(vb_dl_syms[0]); i++) {
        const vb_dl_sym_t *s = &vb_dl_syms[i];
        void *p = dlvsym(h, s->name, s->version);

        if (p == NULL)
            p = dlsym(h, s->name);
        if (p == NULL && !s->optional) {
            const char *e = dlerror();

            snprintf(vb_dl_why, sizeof(vb_dl_why), "%s has no %s (%s): it is not rdma-core's "
                     "libibverbs, or one too old; %s", name, s->name,
                     e != NULL ? e : "dlsym failed", VB_DL_FIX);
            dlclose(h);
            return;
        }
        /* POSIX: a data pointer from dlsym is the function */
        memcpy((char *)&fns + s->off, &p, sizeof(p));
    }
    ring_ibv = fns;
    vb_dl_status = 0; /* the handle stays open: the table points into it */
}

int ring_verbs_dl_load(char *why, size_t why_len)
{
    (void)pthread_once(&vb_dl_once, vb_dl_load_once);
    if (vb_dl_status != 0 && why != NULL && why_len > 0)
        snprintf(why, why_len, "%s", vb_dl_why);
    return vb_dl_status;
}

int ring_ibv_query_port(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr)
{
    struct verbs_context *vctx = verbs_get_ctx_op(context, query_port);

    if (vctx != NULL)
        return vctx->query_port(context, port, attr, sizeof(*attr));
    memset(attr, 0, sizeof(*attr));
    return ring_ibv.query_port(context, port, (struct _compat_ibv_port_attr *)attr);
}

/* The type of a GID, as sysfs tells it: what _ibv_query_gid_ex reads too. */
static uint32_t vb_gid_type_sysfs(struct ibv_context *context, uint32_t port, uint32_t index)
{
    char path[256], text[32] = "";
    struct ibv_port_attr pa;
    FILE *f;

    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%u",
             ring_ibv.get_device_name(context->device), port, index);
    f = fopen(path, "r");
    if (f != NULL) {
        if (fgets(text, sizeof(text), f) == NULL)
            text[0] = '\0';
        fclose(f);
    }
    if (strncmp(text, "RoCE v2", 7) == 0)
        return IBV_GID_TYPE_ROCE_V2;
    return ring_ibv_query_port(context, (uint8_t)port, &pa) == 0 &&
                   pa.link_layer == IBV_LINK_LAYER_ETHERNET
               ? IBV_GID_TYPE_ROCE_V1
               : IBV_GID_TYPE_IB;
}

int ring_ibv_query_gid_ex(struct ibv_context *context, uint32_t port, uint32_t index,
                          struct ibv_gid_entry *entry, uint32_t flags)
{
    if (ring_ibv.query_gid_ex != NULL)
        return ring_ibv.query_gid_ex(context, port, index, entry, flags, sizeof(*entry));
    /* rdma-core before 32 */
    memset(entry, 0, sizeof(*entry));
    if (flags != 0 || port > UINT8_MAX || index > INT32_MAX) {
        errno = EINVAL;
        return -1;
    }
    if (ring_ibv.query_gid(context, (uint8_t)port, (int)index, &entry->gid) != 0)
        return -1;
    entry->gid_index = index;
    entry->port_num = port;
    entry->gid_type = vb_gid_type_sysfs(context, port, index);
    return 0;
}

struct ibv_mr *ring_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
    unsigned int a = (unsigned int)access;

    /* the optional flags need ibv_reg_mr_iova2 (rdma-core 22); without it they are dropped,
     * as iova2 itself drops them on a kernel that lacks them */
    if ((a & IBV_ACCESS_OPTIONAL_RANGE) == 0 || ring_ibv.reg_mr_iova2 == NULL)
        return ring_ibv.reg_mr(pd, addr, length, (int)(a & ~IBV_ACCESS_OPTIONAL_RANGE));
    return ring_ibv.reg_mr_iova2(pd, addr, length, (uintptr_t)addr, a);
}

struct ibv_mr *ring_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                      uint64_t iova, int fd, int access)
{
    if (ring_ibv.reg_dmabuf_mr == NULL) { /* rdma-core before 34 */
        errno = EOPNOTSUPP;
        return NULL;
    }
    return ring_ibv.reg_dmabuf_mr(pd, offset, length, iova, fd, access);
}
