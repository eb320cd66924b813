/*
 * verbs_dl.h - libibverbs, loaded at run time (dlopen), never linked: a
 * table of the functions the verbs transport calls, filled once by
 * ring_verbs_dl_load, as NCCL's ibvwrap does. libringd (and the Python
 * wheel) then loads on hosts without rdma-core, whose libibverbs is the
 * system's and must not be bundled, and runs verbs where the host has it.
 *
 * Include it after <infiniband/verbs.h> (verbs_int.h does): it maps each
 * ibv_* name the transport uses to the table, so the code reads as plain
 * verbs. ibv_post_send, ibv_post_recv, ibv_poll_cq and ibv_req_notify_cq
 * stay verbs.h's inlines: they call through the context's ops, no symbol.
 * ibv_query_port, ibv_reg_mr and ibv_query_gid_ex are inlines or macros of
 * verbs.h that end at other exported symbols; they become functions here
 * that do the same through the table.
 *
 * Call ring_verbs_dl_load before any of them: every entry point of the
 * transport does (vb_dev_open). RING_IBVERBS_LIBRARY names another file
 * than libibverbs.so.1 (tests use a path that does not exist).
 */
#ifndef RING_VERBS_DL_H
#define RING_VERBS_DL_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

/* Loads libibverbs and resolves the table, once per process (thread-safe;
 * later calls give the first one's answer). 0, or -1 with why naming the
 * library, the cause (dlerror's text) and the fix. Never exits. */
int ring_verbs_dl_load(char *why, size_t why_len);

/* The functions, as libibverbs exports them. The optional ones (newer
 * rdma-core) are NULL where this libibverbs lacks them; the wrappers below
 * then do what a build without them would. */
typedef struct ring_ibv_fns {
    struct ibv_device **(*get_device_list)(int *num_devices);
    void (*free_device_list)(struct ibv_device **list);
    const char *(*get_device_name)(struct ibv_device *device);
    struct ibv_context *(*open_device)(struct ibv_device *device);
    int (*close_device)(struct ibv_context *context);
    int (*query_device)(struct ibv_context *context, struct ibv_device_attr *attr);
    /* the exported ibv_query_port fills the older, shorter struct */
    int (*query_port)(struct ibv_context *context, uint8_t port,
                      struct _compat_ibv_port_attr *attr);
    int (*query_gid)(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid);
    int (*query_gid_ex)(struct ibv_context *context, uint32_t port, uint32_t index,
                        struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access);
    struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                   unsigned int access);
    struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t length,
                                    uint64_t iova, int fd, int access);
    int (*dereg_mr)(struct ibv_mr *mr);
    struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *context);
    int (*destroy_comp_channel)(struct ibv_comp_channel *channel);
    struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe, void *cq_context,
                                struct ibv_comp_channel *channel, int comp_vector);
    int (*destroy_cq)(struct ibv_cq *cq);
    int (*get_cq_event)(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context);
    void (*ack_cq_events)(struct ibv_cq *cq, unsigned int nevents);
    struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
    int (*destroy_qp)(struct ibv_qp *qp);
    const char *(*port_state_str)(enum ibv_port_state state);
    const char *(*wc_status_str)(enum ibv_wc_status status);
} ring_ibv_fns_t;

/* Filled by ring_verbs_dl_load; read only after it returned 0. */
extern ring_ibv_fns_t ring_ibv;

/* verbs.h's inline ibv_query_port: the context's extended op, else the export. */
int ring_ibv_query_port(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr);
/* _ibv_query_gid_ex, or (older libibverbs) ibv_query_gid and the GID type from sysfs. */
int ring_ibv_query_gid_ex(struct ibv_context *context, uint32_t port, uint32_t index,
                          struct ibv_gid_entry *entry, uint32_t flags);
/* ibv_reg_mr; ibv_reg_mr_iova2 for IBV_ACCESS_OPTIONAL_RANGE flags, as verbs.h picks. */
struct ibv_mr *ring_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);
/* NULL with errno EOPNOTSUPP where this libibverbs has no ibv_reg_dmabuf_mr. */
struct ibv_mr *ring_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                      uint64_t iova, int fd, int access);

/* verbs.h defines some of these names as macros (ibv_query_port, ibv_reg_mr; and
 * ibv_get_device_list under RDMA_STATIC_PROVIDERS): undefined first, so no warning */
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#define ibv_get_device_list ring_ibv.get_device_list
#define ibv_free_device_list ring_ibv.free_device_list
#define ibv_get_device_name ring_ibv.get_device_name
#define ibv_open_device ring_ibv.open_device
#define ibv_close_device ring_ibv.close_device
#define ibv_query_device ring_ibv.query_device
#define ibv_query_port(ctx, port, attr) ring_ibv_query_port(ctx, port, attr)
#define ibv_query_gid ring_ibv.query_gid
#define ibv_query_gid_ex(ctx, port, index, entry, flags) \
    ring_ibv_query_gid_ex(ctx, port, index, entry, flags)
#define ibv_alloc_pd ring_ibv.alloc_pd
#define ibv_dealloc_pd ring_ibv.dealloc_pd
#define ibv_reg_mr(pd, addr, length, access) ring_ibv_reg_mr(pd, addr, length, access)
#define ibv_reg_dmabuf_mr ring_ibv_reg_dmabuf_mr
#define ibv_dereg_mr ring_ibv.dereg_mr
#define ibv_create_comp_channel ring_ibv.create_comp_channel
#define ibv_destroy_comp_channel ring_ibv.destroy_comp_channel
#define ibv_create_cq ring_ibv.create_cq
#define ibv_destroy_cq ring_ibv.destroy_cq
#define ibv_get_cq_event ring_ibv.get_cq_event
#define ibv_ack_cq_events ring_ibv.ack_cq_events
#define ibv_create_qp ring_ibv.create_qp
#define ibv_modify_qp ring_ibv.modify_qp
#define ibv_destroy_qp ring_ibv.destroy_qp
#define ibv_port_state_str ring_ibv.port_state_str
#define ibv_wc_status_str ring_ibv.wc_status_str

#endif /* RING_VERBS_DL_H */
