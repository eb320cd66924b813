/*
 * t-verbs-record.c - the verbs transport's pieces that need no RDMA device,
 * so they are tested on every host: the QP-detail record (round trips at
 * the extremes, the byte layout, every malformed field rejected with a
 * reason), the --ib-dev / RING_IB_HCA list (NCCL_IB_HCA syntax) and its
 * check in config validation.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringd/ringd.h>

#include "tap.h"
#include "verbs_hca.h"
#include "verbs_record.h"
#include "wire.h"

static vb_record_t sample(void)
{
    vb_record_t r;

    memset(&r, 0, sizeof(r));
    r.link_layer = 2;
    r.mtu = 5;
    r.lid = 0xbeef;
    r.port = 1;
    r.gid_index = 3;
    r.qpn = 0xabcdef;
    r.psn = 0x123456;
    r.rkey = 0xfeedf00d;
    r.addr = 0x00007f1234567000ull;
    r.nslots = 16;
    r.slot_bytes = 262144;
    for (int i = 0; i < 16; i++)
        r.gid[i] = (uint8_t)(0xf0 + i);
    snprintf(r.dev_name, sizeof(r.dev_name), "rxe0");
    return r;
}

static int same(const vb_record_t *a, const vb_record_t *b)
{
    return a->link_layer == b->link_layer && a->mtu == b->mtu && a->lid == b->lid &&
           a->port == b->port && a->gid_index == b->gid_index && a->qpn == b->qpn &&
           a->psn == b->psn && a->rkey == b->rkey && a->addr == b->addr &&
           a->nslots == b->nslots && a->slot_bytes == b->slot_bytes &&
           memcmp(a->gid, b->gid, 16) == 0 && strcmp(a->dev_name, b->dev_name) == 0;
}

static void round_trips(void)
{
    vb_record_t r = sample(), back;
    unsigned char buf[VB_RECORD_BYTES];
    char err[256] = "";

    vb_record_encode(&r, buf);
    ok(vb_record_decode(buf, &back, err, sizeof(err)) == 0 && same(&r, &back),
       "a record round-trips (%s)", err[0] ? err : "no error");
    /* the other extremes */
    r.link_layer = 1;
    r.mtu = 1;
    r.lid = 0xffff;
    r.port = 255;
    r.gid_index = 255;
    r.qpn = 0xffffff;
    r.psn = 0;
    r.rkey = 0xffffffffu;
    r.addr = 0xffffffffffff0000ull - (uint64_t)VB_SLOTS_MAX * 4096;
    r.nslots = VB_SLOTS_MAX;
    r.slot_bytes = VB_SLOT_BYTES_MIN;
    snprintf(r.dev_name, sizeof(r.dev_name), "%s", "mlx5_bond_0123456789abc"); /* 23 chars */
    vb_record_encode(&r, buf);
    ok(vb_record_decode(buf, &back, err, sizeof(err)) == 0 && same(&r, &back),
       "a record with every field at its other extreme round-trips");
    r = sample();
    r.nslots = 1;
    r.slot_bytes = VB_SLOT_BYTES_MAX;
    vb_record_encode(&r, buf);
    ok(vb_record_decode(buf, &back, err, sizeof(err)) == 0 && same(&r, &back),
       "one slot of 1 GiB round-trips");
}

static void layout(void)
{
    vb_record_t r = sample();
    unsigned char buf[VB_RECORD_BYTES];

    vb_record_encode(&r, buf);
    ok(memcmp(buf, "RNGV", 4) == 0, "magic \"RNGV\" at offset 0");
    ok(buf[4] == VB_RECORD_VERSION && buf[5] == 0, "version at 4, little-endian");
    ok(buf[12] == 0xef && buf[13] == 0xcd && buf[14] == 0xab && buf[15] == 0,
       "QP number at 12, little-endian");
    ok(buf[20] == 0x0d && buf[23] == 0xfe, "rkey at 20, little-endian");
    ok(buf[24] == 0x00 && buf[25] == 0x70 && buf[29] == 0x7f, "slot address at 24, little-endian");
    ok(buf[40] == 0xf0 && buf[55] == 0xff, "GID at 40..55 in network order");
    ok(memcmp(buf + 56, "rxe0\0", 5) == 0, "device name at 56");
    for (int i = 80; i < VB_RECORD_BYTES; i++)
        if (buf[i] != 0) {
            ok(0, "reserved bytes 80..95 are zero (byte %d is not)", i);
            return;
        }
    ok(1, "reserved bytes 80..95 are zero");
}

/* Encode sample(), let poke damage it, and expect decode to fail with `word` in the reason. */
static void rejects(const char *what, void (*poke)(unsigned char *), const char *word)
{
    vb_record_t r = sample(), back;
    unsigned char buf[VB_RECORD_BYTES];
    char err[256] = "";
    int rc;

    vb_record_encode(&r, buf);
    poke(buf);
    rc = vb_record_decode(buf, &back, err, sizeof(err));
    ok(rc == -1 && strstr(err, word) != NULL, "rejects %s: \"%s\"", what, err);
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void p_magic(unsigned char *b) { b[0] ^= 0xff; }
static void p_version(unsigned char *b) { b[4] = 2; }
static void p_link0(unsigned char *b) { b[6] = 0; }
static void p_link3(unsigned char *b) { b[6] = 3; }
static void p_mtu0(unsigned char *b) { b[7] = 0; }
static void p_mtu6(unsigned char *b) { b[7] = 6; }
static void p_port0(unsigned char *b) { b[10] = 0; }
static void p_qpn0(unsigned char *b) { put32(b + 12, 0); }
static void p_qpn25(unsigned char *b) { put32(b + 12, 0x1000000); }
static void p_psn25(unsigned char *b) { put32(b + 16, 0x1000000); }
static void p_slots0(unsigned char *b) { put32(b + 32, 0); }
static void p_slots_big(unsigned char *b) { put32(b + 32, VB_SLOTS_MAX + 1); }
static void p_slot_small(unsigned char *b) { put32(b + 36, VB_SLOT_BYTES_MIN - 1); }
static void p_slot_big(unsigned char *b) { put32(b + 36, VB_SLOT_BYTES_MAX + 1); }
static void p_addr0(unsigned char *b) { memset(b + 24, 0, 8); }
static void p_addr_wrap(unsigned char *b) { memset(b + 24, 0xff, 8); }
static void p_name(unsigned char *b) { memset(b + 56, 'x', VB_DEV_NAME_MAX); }
static void p_reserved(unsigned char *b) { b[90] = 1; }

static void malformed(void)
{
    unsigned char hello[RING_HELLO_BYTES];
    ring_hello_t h;
    vb_record_t back;
    char err[256] = "";

    rejects("a wrong magic", p_magic, "not a ringd verbs record");
    rejects("another version", p_version, "version 2");
    rejects("link layer 0", p_link0, "link layer 0");
    rejects("link layer 3", p_link3, "link layer 3");
    rejects("MTU code 0", p_mtu0, "MTU code 0");
    rejects("MTU code 6", p_mtu6, "MTU code 6");
    rejects("port 0", p_port0, "port 0");
    rejects("QP number 0", p_qpn0, "QP number 0x0");
    rejects("a QP number beyond 24 bits", p_qpn25, "24 bits");
    rejects("a PSN beyond 24 bits", p_psn25, "24 bits");
    rejects("no receive slots", p_slots0, "0 receive slots");
    rejects("too many slots", p_slots_big, "1025 receive slots");
    rejects("slots below 4 KiB", p_slot_small, "4095 bytes");
    rejects("slots above 1 GiB", p_slot_big, "1073741825 bytes");
    rejects("slot address 0", p_addr0, "wrap");
    rejects("slots that wrap around", p_addr_wrap, "wrap");
    rejects("an unterminated device name", p_name, "not terminated");
    rejects("a non-zero reserved byte", p_reserved, "reserved byte 90");
    /* what a tcp-transport peer sends first: its hello */
    memset(&h, 0, sizeof(h));
    h.magic = RING_HELLO_MAGIC;
    h.version = RING_WIRE_VERSION;
    ring_hello_encode(&h, hello);
    ok(vb_record_decode(hello, &back, err, sizeof(err)) == -1 &&
           strstr(err, "not a ringd verbs record") != NULL,
       "a tcp hello is not taken for a verbs record: \"%s\"", err);
}

static void hca_ok(const char *spec, const char *dev, int port, int want)
{
    vb_hca_spec_t s;
    char err[256] = "";
    int parsed = vb_hca_parse(spec, &s, err, sizeof(err)) == 0;

    ok(parsed && vb_hca_match(&s, dev, port) == want, "RING_IB_HCA='%s': %s port %d %s%s%s",
       spec, dev, port, want ? "allowed" : "refused", parsed ? "" : " -- parse failed: ",
       parsed ? "" : err);
}

static void hca_bad(const char *spec, const char *word)
{
    vb_hca_spec_t s;
    char err[256] = "";

    ok(vb_hca_parse(spec, &s, err, sizeof(err)) == -1 && strstr(err, word) != NULL,
       "RING_IB_HCA='%s' is refused: \"%s\"", spec, err);
}

static void hca_lists(void)
{
    hca_ok("", "mlx5_0", 1, 1);
    hca_ok("mlx5", "mlx5_0", 1, 1);
    hca_ok("mlx5", "mlx5_1", 2, 1);
    hca_ok("mlx5", "rxe0", 1, 0);
    hca_ok("=mlx5_0", "mlx5_0", 1, 1);
    hca_ok("=mlx5_0", "mlx5_01", 1, 0);
    hca_ok("mlx5_0:1", "mlx5_0", 1, 1);
    hca_ok("mlx5_0:1", "mlx5_0", 2, 0);
    hca_ok("mlx5_0:2,mlx5_1", "mlx5_1", 1, 1);
    hca_ok("^rxe1", "rxe0", 1, 1);
    hca_ok("^rxe1", "rxe1", 1, 0);
    hca_ok("^=rxe1", "rxe10", 1, 1);
    hca_ok("^rxe0:1", "rxe0", 2, 1);
    hca_bad(",", "empty device name");
    hca_bad("rxe0,", "ends with a comma");
    hca_bad("rxe0,,rxe1", "empty device name");
    hca_bad("rxe0:0", "not a number in 1..255");
    hca_bad("rxe0:x", "not a number");
    hca_bad("rxe0:", "bad port");
    hca_bad("a_name_that_is_far_too_long_for_a_device", "too long");
    hca_bad("a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "more than 16");
}

static void config_checks(void)
{
    ring_config_t cfg;
    ring_status_t st;

    ring_config_init(&cfg);
    (void)ring_config_set(&cfg, "rank", "0", RING_SRC_API);
    (void)ring_config_set(&cfg, "world-size", "1", RING_SRC_API);
    st = ring_config_set(&cfg, "ib-dev", "rxe0:99999", RING_SRC_API);
    if (st == RING_OK)
        st = ring_config_validate(&cfg);
    ok(st == RING_ERR_INVALID && strstr(ring_last_error(), "RING_IB_HCA") != NULL,
       "a bad --ib-dev fails config validation naming RING_IB_HCA: %s", ring_last_error());
    ok(ring_config_set(&cfg, "transport", "verbs", RING_SRC_API) == RING_OK &&
           ring_config_set(&cfg, "transport", "ib", RING_SRC_API) == RING_ERR_INVALID,
       "--transport takes verbs and refuses other words");
    ok(ring_config_set(&cfg, "gid-index", "256", RING_SRC_API) == RING_ERR_INVALID &&
           ring_config_set(&cfg, "ib-retry-count", "8", RING_SRC_API) == RING_ERR_INVALID &&
           ring_config_set(&cfg, "ib-timeout", "0", RING_SRC_API) == RING_ERR_INVALID,
       "--gid-index, --ib-retry-count and --ib-timeout are range-checked");
    ring_config_free(&cfg);
}

int main(void)
{
    plan(3 + 8 + 19 + 21 + 3);
    round_trips();
    layout();
    malformed();
    hca_lists();
    config_checks();
    return done_testing();
}
