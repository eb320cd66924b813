/*
 * rdma_devices.c - the active RDMA devices and their packet counters, for
 * the tests that check where the ring's traffic went (rdma_devices.h).
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if RING_HAVE_VERBS
#include <infiniband/verbs.h>

#include "verbs_dl.h" /* libibverbs through the library's dlopen'ed table, as the transport */
#endif

#include "rdma_devices.h"

#if RING_HAVE_VERBS
static int cmp_dev(const void *a, const void *b)
{
    return strcmp(((const rdma_dev_t *)a)->name, ((const rdma_dev_t *)b)->name);
}
#endif

int rdma_devices_find(rdma_dev_t *devs, int max, char *why, size_t len)
{
#if RING_HAVE_VERBS
    int n = 0, found = 0;
    struct ibv_device **list;
    char e[1024];

    if (ring_verbs_dl_load(e, sizeof(e)) != 0) {
        snprintf(why, len, "verbs unavailable: %s", e);
        return 0;
    }
    list = ibv_get_device_list(&n);
    if (list == NULL || n == 0) {
        snprintf(why, len, "ibv_get_device_list: no RDMA devices");
        if (list != NULL)
            ibv_free_device_list(list);
        return 0;
    }
    snprintf(why, len, "%d RDMA device(s), no port ACTIVE", n);
    for (int i = 0; i < n && found < max; i++) {
        struct ibv_context *ctx = ibv_open_device(list[i]);
        struct ibv_device_attr da;

        if (ctx == NULL)
            continue;
        if (ibv_query_device(ctx, &da) == 0) {
            for (int p = 1; p <= da.phys_port_cnt; p++) {
                struct ibv_port_attr pa;

                if (ibv_query_port(ctx, (uint8_t)p, &pa) == 0 && pa.state == IBV_PORT_ACTIVE) {
                    snprintf(devs[found].name, sizeof(devs[found].name), "%s",
                             ibv_get_device_name(list[i]));
                    devs[found].port = p;
                    found++;
                    break;
                }
            }
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    qsort(devs, (size_t)found, sizeof(devs[0]), cmp_dev);
    return found;
#else
    (void)devs;
    (void)max;
    snprintf(why, len, "libringd built without verbs");
    return 0;
#endif
}

void rdma_counters_read(const rdma_dev_t *devs, int n, long long *c)
{
    static const char *const names[] = {"hw_counters/sent_pkts", "counters/port_xmit_packets"};

    for (int d = 0; d < n; d++) {
        c[d] = -1;
        for (int k = 0; k < 2 && c[d] < 0; k++) {
            char path[256];
            FILE *f;

            snprintf(path, sizeof(path), "/sys/class/infiniband/%.63s/ports/%d/%s", devs[d].name,
                     devs[d].port, names[k]);
            f = fopen(path, "r");
            if (f == NULL)
                continue;
            if (fscanf(f, "%lld", &c[d]) != 1)
                c[d] = -1;
            fclose(f);
        }
    }
}

int rdma_counters_readable(const rdma_dev_t *devs, int n)
{
    long long c[RDMA_MAX_DEVS];

    if (n > RDMA_MAX_DEVS)
        n = RDMA_MAX_DEVS;
    rdma_counters_read(devs, n, c);
    for (int d = 0; d < n; d++)
        if (c[d] < 0)
            return 0;
    return n > 0;
}
