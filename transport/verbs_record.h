/*
 * verbs_record.h - what two verbs endpoints tell each other before the
 * first RDMA write: one fixed-width binary record each way over the
 * bootstrap TCP connection, framed like every tcp message (a 4-byte
 * little-endian length, then the bytes), so a peer running the tcp
 * transport sees a 96-byte message and can say which transport we run.
 *
 * No libibverbs here: the record is plain bytes, tested on any host.
 */
#ifndef RING_VERBS_RECORD_H
#define RING_VERBS_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "magic.h"

#define VB_RECORD_VERSION 1
#define VB_RECORD_BYTES 96
#define VB_DEV_NAME_MAX 24          /* with the NUL */
#define VB_SLOTS_MAX 1024
#define VB_SLOT_BYTES_MIN 4096
#define VB_SLOT_BYTES_MAX (1u << 30)

/* One side of a queue pair, as its peer needs it (values in host order). */
typedef struct vb_record {
    uint8_t link_layer;       /* 1 InfiniBand (LID routed), 2 Ethernet (RoCE, GID routed) */
    uint8_t mtu;              /* enum ibv_mtu of the port: 1 = 256 ... 5 = 4096 */
    uint16_t lid;
    uint8_t port;
    uint8_t gid_index;
    uint32_t qpn;             /* 24 bits */
    uint32_t psn;             /* 24 bits */
    uint32_t rkey;            /* of the receive slots */
    uint64_t addr;            /* address of receive slot 0 */
    uint32_t nslots;          /* receive slots, each slot_bytes long, back to back */
    uint32_t slot_bytes;
    uint8_t gid[16];
    char dev_name[VB_DEV_NAME_MAX]; /* for messages */
} vb_record_t;

void vb_record_encode(const vb_record_t *r, unsigned char out[VB_RECORD_BYTES]);
/* 0, or -1 with a reason in err (wrong magic or version, a field out of range). */
int vb_record_decode(const unsigned char in[VB_RECORD_BYTES], vb_record_t *r, char *err,
                     size_t errlen);
/* "fe80::..." or "::ffff:10.0.0.1" for messages. */
void vb_gid_format(const uint8_t gid[16], char *buf, size_t len);

#endif /* RING_VERBS_RECORD_H */
