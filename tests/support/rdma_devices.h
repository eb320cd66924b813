/*
 * rdma_devices.h - the RDMA devices a test's traffic may go through, and
 * their packet counters (t-verbs.c: did the data really cross the devices,
 * and the right ones?). Without verbs in the build no device is found.
 */
#ifndef RING_RDMA_DEVICES_H
#define RING_RDMA_DEVICES_H

#include <stddef.h>

#define RDMA_MAX_DEVS 16

typedef struct rdma_dev {
    char name[64];
    int port; /* its first ACTIVE port */
} rdma_dev_t;

/* Devices with a port in state ACTIVE, sorted by name, at most max; 0 with why
 * saying what was found otherwise. */
int rdma_devices_find(rdma_dev_t *devs, int max, char *why, size_t len);

/* Packets sent by each device: rxe's hw_counters/sent_pkts, else the standard
 * port counter (hardware HCAs); -1 where neither can be read. */
void rdma_counters_read(const rdma_dev_t *devs, int n, long long *c);

/* 1 when every device's counter can be read (and there is one). */
int rdma_counters_readable(const rdma_dev_t *devs, int n);

#endif
