/* ring_order.h - the ring's order of ranks (ring_order.c). */
#ifndef RING_ORDER_H
#define RING_ORDER_H

#include <stddef.h>

/* order[p] = the rank at ring position p, the ranks of a host adjacent
 * (hosts[r] names rank r's host). 0, or -1 when out of memory. */
int ring_order_by_host(const char *const *hosts, int n, int *order);
/* order[p] = p. */
void ring_order_by_rank(int n, int *order);
/* "hostA[0-1] -> hostB[2,3]", cut with "..." when longer than len. */
void ring_order_describe(const char *const *hosts, const int *order, int n, char *buf,
                         size_t len);

#endif /* RING_ORDER_H */
