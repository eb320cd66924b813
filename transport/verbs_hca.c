/*
 * verbs_hca.c - the RDMA device list of --ib-dev / RING_IB_HCA, in
 * NCCL_IB_HCA's syntax (verbs_hca.h). No libibverbs here: the parser is
 * checked by config validation and tested on any host.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verbs_hca.h"

int vb_hca_parse(const char *spec, vb_hca_spec_t *out, char *err, size_t errlen)
{
    const char *p = spec != NULL ? spec : "";

    memset(out, 0, sizeof(*out));
    if (*p == '^') {
        out->exclude = 1;
        p++;
    }
    if (*p == '=') {
        out->exact = 1;
        p++;
    }
    while (*p != '\0') {
        const char *end = strchr(p, ','), *colon;
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        size_t namelen;

        colon = memchr(p, ':', len);
        namelen = colon != NULL ? (size_t)(colon - p) : len;
        if (namelen == 0 || namelen >= VB_HCA_NAME_MAX) {
            snprintf(err, errlen, "RDMA device list '%s': %s device name in entry %d", spec,
                     namelen == 0 ? "an empty" : "a too long", out->n + 1);
            return -1;
        }
        if (out->n == VB_HCA_MAX) {
            snprintf(err, errlen, "RDMA device list '%s': more than %d entries", spec, out->n);
            return -1;
        }
        memcpy(out->name[out->n], p, namelen);
        out->name[out->n][namelen] = '\0';
        if (colon != NULL) {
            char digits[8], *stop;
            size_t dlen = len - namelen - 1;
            long port;

            if (dlen == 0 || dlen >= sizeof(digits)) {
                snprintf(err, errlen, "RDMA device list '%s': entry '%s' has a bad port", spec,
                         out->name[out->n]);
                return -1;
            }
            memcpy(digits, colon + 1, dlen);
            digits[dlen] = '\0';
            port = strtol(digits, &stop, 10);
            if (*stop != '\0' || port < 1 || port > 255) {
                snprintf(err, errlen, "RDMA device list '%s': port '%s' of %s is not a number in "
                         "1..255", spec, digits, out->name[out->n]);
                return -1;
            }
            out->port[out->n] = (int)port;
        }
        out->n++;
        p += len;
        if (*p == ',')
            p++;
        if (end != NULL && *p == '\0') {
            snprintf(err, errlen, "RDMA device list '%s' ends with a comma", spec);
            return -1;
        }
    }
    return 0;
}

int vb_hca_match(const vb_hca_spec_t *spec, const char *dev, int port)
{
    int listed = 0;

    if (spec->n == 0)
        return 1;
    for (int i = 0; i < spec->n && !listed; i++) {
        size_t len = strlen(spec->name[i]);
        int name_ok = spec->exact ? strcmp(dev, spec->name[i]) == 0
                                  : strncmp(dev, spec->name[i], len) == 0;

        listed = name_ok && (spec->port[i] == 0 || spec->port[i] == port);
    }
    return spec->exclude ? !listed : listed;
}
