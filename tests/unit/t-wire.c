/*
 * t-wire.c - what travels between peers (src/wire.c): hello and frame header
 * round trips with every field at its extremes, the little-endian byte
 * layout at the documented offsets, rejection of bad magic, the FNV-1a hash
 * against published test vectors, and the handshake check (handshake.c)
 * naming the field that differs.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm_int.h"
#include "handshake.h"
#include "tap.h"
#include "wire.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rng64(void)
{
    uint64_t x = rng_state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return x;
}

/* the little-endian value of n bytes at p, read independently of wire.c */
static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;

    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int hello_equal(const ring_hello_t *a, const ring_hello_t *b)
{
    return a->version == b->version && a->job_hash == b->job_hash && a->rank == b->rank &&
           a->world_size == b->world_size && a->channel == b->channel &&
           a->stream == b->stream && a->channels == b->channels && a->streams == b->streams &&
           a->chunk_bytes == b->chunk_bytes && a->transport == b->transport &&
           a->peers_hash == b->peers_hash && a->settings_hash == b->settings_hash &&
           strcmp(a->job_text, b->job_text) == 0;
}

static int frame_equal(const ring_frame_t *a, const ring_frame_t *b)
{
    return a->type == b->type && a->dtype == b->dtype && a->op == b->op && a->coll == b->coll &&
           a->channel == b->channel && a->round == b->round && a->count == b->count &&
           a->tensor_id == b->tensor_id && a->chunk == b->chunk && a->step == b->step &&
           a->flags == b->flags && a->payload_bytes == b->payload_bytes &&
           a->origin_rank == b->origin_rank && a->culprit_rank == b->culprit_rank &&
           a->status == b->status && a->sys_errno == b->sys_errno && a->detail == b->detail;
}

static void hello_fill_all(ring_hello_t *h, uint64_t v64, uint32_t v32, uint16_t v16, char c)
{
    memset(h, 0, sizeof(*h));
    h->magic = RING_HELLO_MAGIC;
    h->version = v16;
    h->job_hash = v64;
    h->rank = v32;
    h->world_size = v32;
    h->channel = v32;
    h->stream = v32;
    h->channels = v32;
    h->streams = v32;
    h->chunk_bytes = v64;
    h->transport = v32;
    h->peers_hash = v64;
    h->settings_hash = v64;
    if (c != '\0')
        memset(h->job_text, c, RING_HELLO_JOB_TEXT);
}

static void frame_fill_all(ring_frame_t *f, uint64_t v64, uint32_t v32, uint16_t v16, uint8_t v8,
                           int32_t err)
{
    memset(f, 0, sizeof(*f));
    f->magic = RING_FRAME_MAGIC;
    f->type = v8;
    f->dtype = v8;
    f->op = v8 & 0x0f;
    f->coll = v8 >> 4;
    f->channel = v8;
    f->round = v64;
    f->count = v64;
    f->tensor_id = v32;
    f->chunk = v32;
    f->step = v16;
    f->flags = v16;
    f->payload_bytes = v32;
    f->origin_rank = v32;
    f->culprit_rank = v32;
    f->status = v32;
    f->sys_errno = err;
    f->detail = v64;
}

/* ---- hello -------------------------------------------------------------------- */

static void test_hello_roundtrip(void)
{
    static const struct {
        uint64_t v64;
        uint32_t v32;
        uint16_t v16;
        char c;
        const char *what;
    } cases[] = {
        {0, 0, 0, '\0', "all zero, empty job text"},
        {UINT64_MAX, UINT32_MAX, UINT16_MAX, 'z', "all ones, 40-character job text"},
        {0x8000000000000000ull, 0x80000000u, 0x8000u, '~', "top bits only"},
        {1, 1, 1, 'a', "ones"},
        {0x0102030405060708ull, 0x0a0b0c0du, 0x1122u, 'Q', "distinct bytes"},
    };
    unsigned char buf[RING_HELLO_BYTES];
    ring_hello_t h, d;
    int bad = 0;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hello_fill_all(&h, cases[i].v64, cases[i].v32, cases[i].v16, cases[i].c);
        memset(buf, 0xa5, sizeof(buf));
        ring_hello_encode(&h, buf);
        memset(&d, 0x5a, sizeof(d));
        ok(ring_hello_decode(buf, &d) == 0 && d.magic == RING_HELLO_MAGIC && hello_equal(&h, &d),
           "hello round trip: %s", cases[i].what);
    }

    /* many random hellos (job texts of every length 0..40) */
    for (int i = 0; i < 2000 && !bad; i++) {
        size_t len = (size_t)(rng64() % (RING_HELLO_JOB_TEXT + 1));

        memset(&h, 0, sizeof(h));
        h.version = (uint16_t)rng64();
        h.job_hash = rng64();
        h.rank = (uint32_t)rng64();
        h.world_size = (uint32_t)rng64();
        h.channel = (uint32_t)rng64();
        h.stream = (uint32_t)rng64();
        h.channels = (uint32_t)rng64();
        h.streams = (uint32_t)rng64();
        h.chunk_bytes = rng64();
        h.transport = (uint32_t)rng64();
        h.peers_hash = rng64();
        h.settings_hash = rng64();
        for (size_t k = 0; k < len; k++)
            h.job_text[k] = (char)(' ' + rng64() % 95);
        ring_hello_encode(&h, buf);
        if (ring_hello_decode(buf, &d) != 0 || !hello_equal(&h, &d)) {
            diag("random hello %d (job text of %zu) did not survive encode/decode", i, len);
            bad = 1;
        }
    }
    ok(!bad, "2000 random hellos survive encode/decode");
}

static void test_hello_layout(void)
{
    unsigned char buf[RING_HELLO_BYTES];
    ring_hello_t h;
    int bad = 0;

    ok(RING_HELLO_BYTES == 128, "a hello is 128 bytes");
    memset(&h, 0, sizeof(h));
    h.version = 0x0102;
    h.job_hash = 0x1112131415161718ull;
    h.rank = 0x21222324u;
    h.world_size = 0x25262728u;
    h.channel = 0x31323334u;
    h.stream = 0x35363738u;
    h.channels = 0x41424344u;
    h.streams = 0x45464748u;
    h.chunk_bytes = 0x5152535455565758ull;
    h.transport = 0x61626364u;
    h.peers_hash = 0x7172737475767778ull;
    h.settings_hash = 0x8182838485868788ull;
    snprintf(h.job_text, sizeof(h.job_text), "job-42");
    memset(buf, 0xee, sizeof(buf));
    ring_hello_encode(&h, buf);

    ok(memcmp(buf, "RNGH", 4) == 0, "hello starts with the bytes 'RNGH' (magic 0x%08x LE)",
       RING_HELLO_MAGIC);
    is_int((long long)le(buf + 0, 4), RING_HELLO_MAGIC, "hello magic little-endian at 0");
    ok(buf[4] == 0x02 && buf[5] == 0x01, "version 0x0102 is 02 01 at offset 4");
    ok(buf[8] == 0x18 && buf[15] == 0x11, "job hash least significant byte first at offset 8");
    ok(buf[16] == 0x24 && buf[17] == 0x23 && buf[18] == 0x22 && buf[19] == 0x21,
       "rank 0x21222324 is 24 23 22 21 at offset 16");
    {
        static const struct {
            int off, width;
            uint64_t want;
            const char *name;
        } layout[] = {
            {20, 4, 0x25262728u, "world_size"},   {24, 4, 0x31323334u, "channel"},
            {28, 4, 0x35363738u, "stream"},       {32, 4, 0x41424344u, "channels"},
            {36, 4, 0x45464748u, "streams"},      {40, 8, 0x5152535455565758ull, "chunk_bytes"},
            {48, 4, 0x61626364u, "transport"},    {56, 8, 0x7172737475767778ull, "peers_hash"},
            {64, 8, 0x8182838485868788ull, "settings_hash"},
        };
        for (size_t i = 0; i < sizeof(layout) / sizeof(layout[0]); i++)
            if (le(buf + layout[i].off, layout[i].width) != layout[i].want) {
                diag("%s at offset %d is %#" PRIx64, layout[i].name, layout[i].off,
                     le(buf + layout[i].off, layout[i].width));
                bad = 1;
            }
        ok(!bad, "world_size, channel, stream, channels, streams, chunk_bytes, transport, "
                 "peers_hash, settings_hash at offsets 20..64, little-endian");
    }
    ok(memcmp(buf + 72, "job-42", 6) == 0, "job text at offset 72");
    bad = 0;
    for (int i = 0; i < RING_HELLO_BYTES; i++) {
        int pad = (i >= 6 && i < 8) || (i >= 52 && i < 56) || (i >= 78);
        if (pad && buf[i] != 0) {
            diag("byte %d is %#x", i, buf[i]);
            bad = 1;
        }
    }
    ok(!bad, "padding and the rest of the job text are zero whatever the buffer held");

    /* a job text of exactly 40 characters, and one that is not terminated on the wire */
    memset(h.job_text, 'x', RING_HELLO_JOB_TEXT);
    h.job_text[RING_HELLO_JOB_TEXT] = '\0';
    ring_hello_encode(&h, buf);
    ok(buf[72 + RING_HELLO_JOB_TEXT - 1] == 'x' && buf[72 + RING_HELLO_JOB_TEXT] == 0,
       "a 40-character job text fills bytes 72..111 and no more");
    {
        ring_hello_t d;

        memset(buf + 72, 'y', RING_HELLO_BYTES - 72); /* no NUL anywhere after the text */
        ok(ring_hello_decode(buf, &d) == 0 && strlen(d.job_text) == RING_HELLO_JOB_TEXT &&
               d.job_text[0] == 'y',
           "decoding an unterminated job text stops at 40 characters");
    }
    /* the encoder writes the magic whatever the struct says */
    {
        ring_hello_t d;

        h.magic = 0;
        ring_hello_encode(&h, buf);
        ok(ring_hello_decode(buf, &d) == 0 && d.magic == RING_HELLO_MAGIC,
           "the encoder writes the hello magic even when h->magic is 0");
    }
}

static void test_hello_bad_magic(void)
{
    unsigned char buf[RING_HELLO_BYTES], fbuf[RING_FRAME_BYTES + RING_HELLO_BYTES];
    ring_hello_t h, d;
    ring_frame_t f;
    int bad = 0;

    hello_fill_all(&h, 7, 7, 1, 'j');
    ring_hello_encode(&h, buf);
    for (int i = 0; i < 4; i++)
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (unsigned char)(1u << bit);
            if (ring_hello_decode(buf, &d) != -1) {
                diag("hello with bit %d of byte %d flipped decoded", bit, i);
                bad = 1;
            }
            buf[i] ^= (unsigned char)(1u << bit);
        }
    ok(!bad, "a hello with any single bit of the magic flipped is rejected");
    memset(buf, 0, sizeof(buf));
    ok(ring_hello_decode(buf, &d) == -1, "an all-zero hello is rejected");
    memset(&f, 0, sizeof(f));
    memset(fbuf, 0, sizeof(fbuf));
    ring_frame_encode(&f, fbuf);
    ok(ring_hello_decode(fbuf, &d) == -1, "a frame header is not a hello");
    ring_hello_encode(&h, buf);
    ok(ring_frame_decode(buf, &f) == -1, "a hello is not a frame header");
    memcpy(buf, "HGNR", 4); /* big-endian magic */
    ok(ring_hello_decode(buf, &d) == -1, "the magic in big-endian byte order is rejected");
}

/* ---- frame -------------------------------------------------------------------- */

static void test_frame_roundtrip(void)
{
    static const struct {
        uint64_t v64;
        uint32_t v32;
        uint16_t v16;
        uint8_t v8;
        int32_t err;
        const char *what;
    } cases[] = {
        {0, 0, 0, 0, 0, "all zero"},
        {UINT64_MAX, UINT32_MAX, UINT16_MAX, UINT8_MAX, -1, "all ones, errno -1"},
        {0x8000000000000000ull, 0x80000000u, 0x8000u, 0x80, INT32_MIN, "top bits, errno INT32_MIN"},
        {0x7fffffffffffffffull, 0x7fffffffu, 0x7fff, 0x7f, INT32_MAX, "errno INT32_MAX"},
        {0x0102030405060708ull, 0x0a0b0c0du, 0x1122u, 0x33, 110, "distinct bytes, ETIMEDOUT"},
    };
    unsigned char buf[RING_FRAME_BYTES];
    ring_frame_t f, d;
    int bad = 0;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        frame_fill_all(&f, cases[i].v64, cases[i].v32, cases[i].v16, cases[i].v8, cases[i].err);
        ring_frame_encode(&f, buf);
        memset(&d, 0x5a, sizeof(d));
        ok(ring_frame_decode(buf, &d) == 0 && d.magic == RING_FRAME_MAGIC && frame_equal(&f, &d),
           "frame round trip: %s", cases[i].what);
    }
    for (int type = RING_FRAME_DATA; type <= RING_FRAME_CLOSE; type++) {
        frame_fill_all(&f, 3, 3, 3, 3, 0);
        f.type = (uint8_t)type;
        ring_frame_encode(&f, buf);
        if (ring_frame_decode(buf, &d) != 0 || d.type != type)
            bad = 1;
    }
    ok(!bad, "DATA, ABORT and CLOSE frame types survive");
    bad = 0;
    for (int i = 0; i < 2000 && !bad; i++) {
        memset(&f, 0, sizeof(f));
        f.type = (uint8_t)rng64();
        f.dtype = (uint8_t)rng64();
        f.op = (uint8_t)(rng64() & 0x0f);
        f.coll = (uint8_t)(rng64() & 0x0f);
        f.channel = (uint8_t)rng64();
        f.round = rng64();
        f.count = rng64();
        f.tensor_id = (uint32_t)rng64();
        f.chunk = (uint32_t)rng64();
        f.step = (uint16_t)rng64();
        f.flags = (uint16_t)rng64();
        f.payload_bytes = (uint32_t)rng64();
        f.origin_rank = (uint32_t)rng64();
        f.culprit_rank = (uint32_t)rng64();
        f.status = (uint32_t)rng64();
        f.sys_errno = (int32_t)(uint32_t)rng64();
        f.detail = rng64();
        ring_frame_encode(&f, buf);
        if (ring_frame_decode(buf, &d) != 0 || !frame_equal(&f, &d)) {
            diag("random frame %d did not survive encode/decode", i);
            bad = 1;
        }
    }
    ok(!bad, "2000 random frame headers survive encode/decode");
}

static void test_frame_layout(void)
{
    unsigned char buf[RING_FRAME_BYTES];
    ring_frame_t f;
    int bad = 0;

    ok(RING_FRAME_BYTES == 64, "a frame header is 64 bytes");
    memset(&f, 0, sizeof(f));
    f.type = RING_FRAME_ABORT;
    f.dtype = 0x05;
    f.op = 0x06;
    f.channel = 0x07;
    f.round = 0x1112131415161718ull;
    f.count = 0x2122232425262728ull;
    f.tensor_id = 0x31323334u;
    f.chunk = 0x35363738u;
    f.step = 0x4142;
    f.flags = 0x4344;
    f.payload_bytes = 0x51525354u;
    f.origin_rank = 0x61626364u;
    f.culprit_rank = 0x65666768u;
    f.status = 0x71727374u;
    f.sys_errno = -2; /* 0xfffffffe */
    f.detail = 0x8182838485868788ull;
    memset(buf, 0xee, sizeof(buf));
    ring_frame_encode(&f, buf);

    ok(memcmp(buf, "RNGF", 4) == 0, "frame starts with the bytes 'RNGF' (magic 0x%08x LE)",
       RING_FRAME_MAGIC);
    ok(buf[4] == RING_FRAME_ABORT && buf[5] == 0x05 && buf[6] == 0x06 && buf[7] == 0x07,
       "type, dtype, op, channel are bytes 4, 5, 6, 7");
    ok(buf[8] == 0x18 && buf[15] == 0x11, "round least significant byte first at offset 8");
    ok(buf[32] == 0x42 && buf[33] == 0x41, "step 0x4142 is 42 41 at offset 32");
    ok(buf[52] == 0xfe && buf[53] == 0xff && buf[54] == 0xff && buf[55] == 0xff,
       "errno -2 is fe ff ff ff at offset 52 (two's complement, little-endian)");
    {
        static const struct {
            int off, width;
            uint64_t want;
            const char *name;
        } layout[] = {
            {16, 8, 0x2122232425262728ull, "count"}, {24, 4, 0x31323334u, "tensor_id"},
            {28, 4, 0x35363738u, "chunk"},          {34, 2, 0x4344, "flags"},
            {36, 4, 0x51525354u, "payload_bytes"},  {40, 4, 0x61626364u, "origin_rank"},
            {44, 4, 0x65666768u, "culprit_rank"},   {48, 4, 0x71727374u, "status"},
            {56, 8, 0x8182838485868788ull, "detail"},
        };
        for (size_t i = 0; i < sizeof(layout) / sizeof(layout[0]); i++)
            if (le(buf + layout[i].off, layout[i].width) != layout[i].want) {
                diag("%s at offset %d is %#" PRIx64, layout[i].name, layout[i].off,
                     le(buf + layout[i].off, layout[i].width));
                bad = 1;
            }
        ok(!bad, "count, tensor_id, chunk, flags, payload_bytes, origin/culprit rank, status, "
                 "detail at offsets 16..56, little-endian");
    }
    /* every byte of the header comes from a field: nothing of the buffer leaks */
    memset(&f, 0, sizeof(f));
    memset(buf, 0xee, sizeof(buf));
    ring_frame_encode(&f, buf);
    bad = 0;
    for (int i = 4; i < RING_FRAME_BYTES; i++)
        bad |= buf[i] != 0;
    ok(!bad, "a zero frame encodes as the magic and 60 zero bytes whatever the buffer held");
    /* each field moves only its own bytes */
    {
        unsigned char base[RING_FRAME_BYTES], one[RING_FRAME_BYTES];
        ring_frame_t z;

        memset(&z, 0, sizeof(z));
        ring_frame_encode(&z, base);
        bad = 0;
        for (int field = 0; field < 16; field++) {
            static const int off[16] = {4, 5, 6, 7, 8, 16, 24, 28, 32, 34, 36, 40, 44, 48, 52, 56};
            static const int width[16] = {1, 1, 1, 1, 8, 8, 4, 4, 2, 2, 4, 4, 4, 4, 4, 8};
            ring_frame_t g = z;

            switch (field) {
            case 0: g.type = UINT8_MAX; break;
            case 1: g.dtype = UINT8_MAX; break;
            case 2: g.op = 0x0f, g.coll = 0x0f; break; /* they share byte 6 */
            case 3: g.channel = UINT8_MAX; break;
            case 4: g.round = UINT64_MAX; break;
            case 5: g.count = UINT64_MAX; break;
            case 6: g.tensor_id = UINT32_MAX; break;
            case 7: g.chunk = UINT32_MAX; break;
            case 8: g.step = UINT16_MAX; break;
            case 9: g.flags = UINT16_MAX; break;
            case 10: g.payload_bytes = UINT32_MAX; break;
            case 11: g.origin_rank = UINT32_MAX; break;
            case 12: g.culprit_rank = UINT32_MAX; break;
            case 13: g.status = UINT32_MAX; break;
            case 14: g.sys_errno = -1; break;
            default: g.detail = UINT64_MAX; break;
            }
            ring_frame_encode(&g, one);
            for (int i = 0; i < RING_FRAME_BYTES; i++) {
                int inside = i >= off[field] && i < off[field] + width[field];
                if ((inside && one[i] != 0xff) || (!inside && one[i] != base[i])) {
                    diag("field %d: byte %d is %#x", field, i, one[i]);
                    bad = 1;
                    break;
                }
            }
        }
        ok(!bad, "each of the 16 frame fields occupies exactly its own bytes");
    }
}

static void test_frame_bad_magic(void)
{
    unsigned char buf[RING_FRAME_BYTES];
    ring_frame_t f, d;
    int bad = 0;

    frame_fill_all(&f, 9, 9, 9, 1, 0);
    ring_frame_encode(&f, buf);
    for (int i = 0; i < 4; i++)
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (unsigned char)(1u << bit);
            if (ring_frame_decode(buf, &d) != -1) {
                diag("frame with bit %d of byte %d flipped decoded", bit, i);
                bad = 1;
            }
            buf[i] ^= (unsigned char)(1u << bit);
        }
    ok(!bad, "a frame with any single bit of the magic flipped is rejected");
    memset(buf, 0, sizeof(buf));
    ok(ring_frame_decode(buf, &d) == -1, "an all-zero frame header is rejected");
    memcpy(buf, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 28);
    ok(ring_frame_decode(buf, &d) == -1, "an HTTP request is not a frame header");
}

/* ---- hash ---------------------------------------------------------------------- */

static void test_hash(void)
{
    unsigned char all[256];
    uint64_t h;

    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    is_int((long long)RING_HASH_INIT, (long long)0xcbf29ce484222325ull,
           "RING_HASH_INIT is the FNV-1a 64-bit offset basis");
    ok(ring_hash_bytes(RING_HASH_INIT, "", 0) == 0xcbf29ce484222325ull,
       "FNV-1a of the empty string is the offset basis");
    ok(ring_hash_bytes(RING_HASH_INIT, "a", 1) == 0xaf63dc4c8601ec8cull,
       "FNV-1a(\"a\") = 0xaf63dc4c8601ec8c (published test vector)");
    ok(ring_hash_bytes(RING_HASH_INIT, "foobar", 6) == 0x85944171f73967e8ull,
       "FNV-1a(\"foobar\") = 0x85944171f73967e8 (published test vector)");
    h = ring_hash_bytes(RING_HASH_INIT, "127.0.0.1:29500,127.0.0.1:29501", 31);
    if (!ok(h == 0x3e3db0cac160fed8ull, "FNV-1a of a peer list is stable (0x3e3db0cac160fed8)"))
        diag("got %#" PRIx64, h);
    h = ring_hash_bytes(RING_HASH_INIT, all, sizeof(all));
    if (!ok(h == 0x4242dc5249c33625ull, "FNV-1a of the bytes 0..255 is 0x4242dc5249c33625"))
        diag("got %#" PRIx64, h);
    ok(ring_hash_bytes(ring_hash_bytes(RING_HASH_INIT, "foo", 3), "bar", 3) ==
           ring_hash_bytes(RING_HASH_INIT, "foobar", 6),
       "hashing in pieces equals hashing at once");
    ok(ring_hash_bytes(RING_HASH_INIT, "ab", 2) != ring_hash_bytes(RING_HASH_INIT, "ba", 2),
       "the hash depends on byte order");
}

/* ---- handshake ------------------------------------------------------------------- */

static ring_comm_t *fake_comm(int rank, int size, const char *job, size_t chunk, const char *peers)
{
    ring_comm_t *c = calloc(1, sizeof(*c));

    if (c == NULL)
        bail("out of memory");
    ring_config_init(&c->cfg);
    snprintf(c->cfg.job_id, sizeof(c->cfg.job_id), "%s", job);
    c->cfg.chunk_bytes = chunk;
    if (ring_config_set(&c->cfg, "peers", peers, RING_SRC_API) != RING_OK)
        bail("ring_config_set peers: %s", ring_last_error());
    c->rank = rank;
    c->size = size;
    c->nchannels = 2;
    c->nstreams = 3;
    c->tp_ops = ring_tp_find("tcp");
    return c;
}

static void free_comm(ring_comm_t *c)
{
    ring_config_free(&c->cfg);
    free(c);
}

static void test_handshake(void)
{
    const char *peers = "127.0.0.1:29500,127.0.0.1:29501";
    ring_comm_t *a = fake_comm(0, 2, "train-7", 1u << 20, peers);
    ring_comm_t *b = fake_comm(1, 2, "train-7", 1u << 20, peers);
    ring_hello_t ha, hb, d;
    unsigned char buf[RING_HELLO_BYTES];

    ring_hello_fill(a, 1, 2, &ha);
    ring_hello_fill(b, 1, 2, &hb);
    ok(ha.magic == RING_HELLO_MAGIC && ha.version == RING_WIRE_VERSION && ha.rank == 0 &&
           ha.world_size == 2 && ha.channel == 1 && ha.stream == 2 && ha.channels == 2 &&
           ha.streams == 3 && ha.chunk_bytes == (1u << 20) && ha.transport == 1 &&
           strcmp(ha.job_text, "train-7") == 0 &&
           ha.job_hash == ring_hash_bytes(RING_HASH_INIT, "train-7", 7) &&
           ha.peers_hash == ring_hash_bytes(RING_HASH_INIT, peers, strlen(peers)),
       "ring_hello_fill describes the communicator");
    ring_hello_encode(&hb, buf);
    ok(ring_hello_decode(buf, &d) == 0 && ring_hello_check(a, &ha, &d, "127.0.0.1:29501") == RING_OK,
       "two peers of one job agree after a trip over the wire");

    b->cfg.chunk_bytes = 4u << 20;
    ring_hello_fill(b, 1, 2, &hb);
    ok(ring_hello_check(a, &ha, &hb, "127.0.0.1:29501") == RING_ERR_MISMATCH,
       "a different chunk size is a mismatch");
    like(ring_last_error(), "chunk size (RING_CHUNK_SIZE) differs: rank 0 has 1048576, rank 1 has "
                            "4194304", "the message names the setting and both values");
    like(ring_last_error(), "127.0.0.1:29501", "the message names the peer's address");

    free_comm(b);
    b = fake_comm(1, 2, "other-job", 1u << 20, peers);
    ring_hello_fill(b, 1, 2, &hb);
    ok(ring_hello_check(a, &ha, &hb, "x") == RING_ERR_MISMATCH &&
           strstr(ring_last_error(), "job id differs") != NULL &&
           strstr(ring_last_error(), "'train-7'") != NULL &&
           strstr(ring_last_error(), "'other-job'") != NULL,
       "a different job id is refused, naming both ids");

    free_comm(b);
    b = fake_comm(1, 2, "train-7", 1u << 20, "127.0.0.1:29500,127.0.0.1:29999");
    ring_hello_fill(b, 1, 2, &hb);
    ok(ring_hello_check(a, &ha, &hb, "x") == RING_ERR_MISMATCH &&
           strstr(ring_last_error(), "peer list (RING_PEERS)") != NULL,
       "a different peer list is a mismatch naming RING_PEERS");

    free_comm(b);
    b = fake_comm(1, 2, "train-7", 1u << 20, peers);
    ring_hello_fill(b, 1, 2, &hb);
    hb.version = RING_WIRE_VERSION + 1;
    ok(ring_hello_check(a, &ha, &hb, "x") == RING_ERR_MISMATCH &&
           strstr(ring_last_error(), "protocol version") != NULL,
       "another protocol version is a mismatch");
    ring_hello_fill(b, 1, 2, &hb);
    hb.settings_hash ^= 1;
    ok(ring_hello_check(a, &ha, &hb, "x") == RING_ERR_MISMATCH &&
           strstr(ring_last_error(), "settings hash") != NULL,
       "a settings hash that differs alone is still a mismatch");
    free_comm(a);
    free_comm(b);
}

int main(void)
{
    plan(59);
    test_hello_roundtrip();  /* 6 */
    test_hello_layout();     /* 12 */
    test_hello_bad_magic();  /* 5 */
    test_frame_roundtrip();  /* 7 */
    test_frame_layout();     /* 9 */
    test_frame_bad_magic();  /* 3 */
    test_hash();             /* 8 */
    test_handshake();        /* 9 */
    return done_testing();
}
