/*
 * fault_inject.h - RING_FAULT's wire faults, for tests (fault_inject.c).
 */
#ifndef RING_FAULT_INJECT_H
#define RING_FAULT_INJECT_H

#include "comm_int.h"

/* fault_inject.c: ops wrapped so a test's RING_FAULT damages frames on the way out,
 * or ops themselves when RING_FAULT names no wire fault */
const ring_tp_ops_t *ring_fault_wrap(const ring_tp_ops_t *ops);

#endif /* RING_FAULT_INJECT_H */
