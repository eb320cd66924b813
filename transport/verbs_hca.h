/*
 * verbs_hca.h - which RDMA devices and ports --ib-dev / RING_IB_HCA allows:
 * a comma list of NAME[:PORT] (NCCL_IB_HCA's syntax). Names are prefixes
 * ("mlx5" matches mlx5_0 and mlx5_1) unless the list starts with '='; a
 * leading '^' allows every device but the listed ones; no port = any port.
 */
#ifndef RING_VERBS_HCA_H
#define RING_VERBS_HCA_H

#include <stddef.h>

#define VB_HCA_MAX 16
#define VB_HCA_NAME_MAX 24 /* with the NUL */

typedef struct vb_hca_spec {
    int exclude;               /* '^': every device but these */
    int exact;                 /* '=': names match exactly, not as prefixes */
    int n;
    char name[VB_HCA_MAX][VB_HCA_NAME_MAX];
    int port[VB_HCA_MAX];      /* 0 = any port */
} vb_hca_spec_t;

/* 0, or -1 with the reason in err. NULL or "" = every device. */
int vb_hca_parse(const char *spec, vb_hca_spec_t *out, char *err, size_t errlen);
/* 1 when device dev, port port is allowed. */
int vb_hca_match(const vb_hca_spec_t *spec, const char *dev, int port);

#endif /* RING_VERBS_HCA_H */
