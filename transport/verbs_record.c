/*
 * verbs_record.c - the QP-detail record (verbs_record.h), field by field in
 * little-endian, never by memcpy of a struct; decoding checks every field
 * a later ibv_modify_qp or RDMA write would trust.
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "le.h"
#include "verbs_record.h"

/* offsets: magic 0, version 4, link_layer 6, mtu 7, lid 8, port 10, gid_index 11,
 * qpn 12, psn 16, rkey 20, addr 24, nslots 32, slot_bytes 36, gid 40, dev_name 56,
 * reserved (zero) 80..95 */
void vb_record_encode(const vb_record_t *r, unsigned char out[VB_RECORD_BYTES])
{
    memset(out, 0, VB_RECORD_BYTES);
    le_put32(out + 0, VB_RECORD_MAGIC);
    le_put16(out + 4, VB_RECORD_VERSION);
    out[6] = r->link_layer;
    out[7] = r->mtu;
    le_put16(out + 8, r->lid);
    out[10] = r->port;
    out[11] = r->gid_index;
    le_put32(out + 12, r->qpn);
    le_put32(out + 16, r->psn);
    le_put32(out + 20, r->rkey);
    le_put64(out + 24, r->addr);
    le_put32(out + 32, r->nslots);
    le_put32(out + 36, r->slot_bytes);
    memcpy(out + 40, r->gid, 16);
    memcpy(out + 56, r->dev_name, strnlen(r->dev_name, VB_DEV_NAME_MAX - 1));
}

int vb_record_decode(const unsigned char in[VB_RECORD_BYTES], vb_record_t *r, char *err,
                     size_t errlen)
{
    uint32_t magic = le_get32(in);
    uint16_t version = le_get16(in + 4);

    memset(r, 0, sizeof(*r));
    if (magic != VB_RECORD_MAGIC) {
        snprintf(err, errlen, "not a ringd verbs record (magic %08x)", magic);
        return -1;
    }
    if (version != VB_RECORD_VERSION) {
        snprintf(err, errlen, "verbs record version %u, this ringd speaks %u (run the same "
                 "ringd version on every peer)", version, VB_RECORD_VERSION);
        return -1;
    }
    r->link_layer = in[6];
    r->mtu = in[7];
    r->lid = le_get16(in + 8);
    r->port = in[10];
    r->gid_index = in[11];
    r->qpn = le_get32(in + 12);
    r->psn = le_get32(in + 16);
    r->rkey = le_get32(in + 20);
    r->addr = le_get64(in + 24);
    r->nslots = le_get32(in + 32);
    r->slot_bytes = le_get32(in + 36);
    memcpy(r->gid, in + 40, 16);
    memcpy(r->dev_name, in + 56, VB_DEV_NAME_MAX);
    if (r->link_layer != 1 && r->link_layer != 2)
        snprintf(err, errlen, "link layer %u (1 InfiniBand, 2 Ethernet)", r->link_layer);
    else if (r->mtu < 1 || r->mtu > 5)
        snprintf(err, errlen, "path MTU code %u (1..5)", r->mtu);
    else if (r->port == 0)
        snprintf(err, errlen, "port 0");
    else if (r->qpn == 0 || r->qpn > 0xffffff || r->psn > 0xffffff)
        snprintf(err, errlen, "QP number 0x%x or PSN 0x%x out of 24 bits", r->qpn, r->psn);
    else if (r->nslots == 0 || r->nslots > VB_SLOTS_MAX)
        snprintf(err, errlen, "%u receive slots (1..%d)", r->nslots, VB_SLOTS_MAX);
    else if (r->slot_bytes < VB_SLOT_BYTES_MIN || r->slot_bytes > VB_SLOT_BYTES_MAX)
        snprintf(err, errlen, "receive slots of %u bytes (%d..%u)", r->slot_bytes,
                 VB_SLOT_BYTES_MIN, VB_SLOT_BYTES_MAX);
    else if (r->addr == 0 || r->addr + (uint64_t)r->nslots * r->slot_bytes < r->addr)
        snprintf(err, errlen, "receive slots at 0x%llx wrap around",
                 (unsigned long long)r->addr);
    else if (memchr(r->dev_name, '\0', VB_DEV_NAME_MAX) == NULL)
        snprintf(err, errlen, "device name not terminated");
    else {
        for (int i = 80; i < VB_RECORD_BYTES; i++)
            if (in[i] != 0) {
                snprintf(err, errlen, "reserved byte %d is not zero", i);
                return -1;
            }
        return 0;
    }
    return -1;
}

void vb_gid_format(const uint8_t gid[16], char *buf, size_t len)
{
    char text[INET6_ADDRSTRLEN];

    if (inet_ntop(AF_INET6, gid, text, sizeof(text)) == NULL)
        snprintf(text, sizeof(text), "?");
    snprintf(buf, len, "%s", text);
}
