/* verbs.h - the RDMA verbs transport (built when configure finds libibverbs). */
#ifndef RING_VERBS_H
#define RING_VERBS_H

#include <stddef.h>

#include "transport.h"

extern const ring_tp_ops_t ring_verbs_ops;

/* 1 when an active RDMA port matching params exists; else 0 and why. */
int ring_verbs_probe(const ring_tp_params_t *params, char *why, size_t whylen);

#endif /* RING_VERBS_H */
