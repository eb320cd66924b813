/*
 * t-frame-mac.c - --auth frames: every frame carries a tag (src/frame_mac.c):
 *   - the tags: a sealed frame opens on the other end of its connection; a
 *     changed payload, header or tag, a replay, an older counter, a frame
 *     reflected back, or another connection's keys are refused;
 *   - N=3 real processes with --auth frames (2 channels x 2 streams, small
 *     chunks): fp32 and fp16+lz4 allreduces, broadcast and allgather, right;
 *   - a peer without --auth frames: the start-up names the setting;
 *   - --auth frames without a secret: refused, naming the fix;
 *   - a frame altered after tagging (RING_FAULT=frame-tag on rank 1): its
 *     receiver refuses it naming the tag and rank 1, and no peer hangs.
 */
#include "ring_build.h"

#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "frame_mac.h"
#include "harness.h"
#include "tap.h"
#include "wire.h"

#define SECRET "0123456789abcdef-t-frame-mac"
#define V_STATUS 0
#define V_BAD 1
#define COUNT (300 * 1000 + 17)

/* ---- the tags, in one process ------------------------------------------------ */

static void seal_frame(ring_frame_macs_t *t, ring_tp_ep_t *ep, unsigned char *hdr,
                       const unsigned char *payload, size_t len, uint32_t chunk)
{
    ring_frame_t f = {.type = RING_FRAME_DATA, .chunk = chunk, .payload_bytes = (uint32_t)len};

    ring_frame_encode(&f, hdr);
    ok(ring_frame_macs_seal(t, ep, hdr, payload, NULL, len) == 0, "chunk %u sealed", chunk);
}

/* A handshake of rank 0 calling rank 1, in memory (auth.h): 0 when it finished. */
static int handshake(const ring_auth_key_t *key, ring_auth_hs_t *c, ring_auth_hs_t *a)
{
    ring_auth_party_t pc, pa;
    unsigned char ch_c[RING_AUTH_CHALLENGE_BYTES], ch_a[RING_AUTH_CHALLENGE_BYTES];
    unsigned char proof_c[RING_AUTH_PROOF_BYTES], proof_a[RING_AUTH_PROOF_BYTES];

    ring_auth_party_init(&pc, key, "t-frame-mac", RING_AUTH_FOR_RING, 0, 1);
    ring_auth_party_init(&pa, key, "t-frame-mac", RING_AUTH_FOR_RING, 1, RING_AUTH_NO_RANK);
    return ring_auth_hs_start(c, &pc, 0, ch_c) == 0 && ring_auth_hs_start(a, &pa, 1, NULL) == 0 &&
                   ring_auth_hs_challenge(a, ch_c, sizeof(ch_c), ch_a) == 0 &&
                   ring_auth_hs_challenge(c, ch_a, sizeof(ch_a), proof_c) == 0 &&
                   ring_auth_hs_proof(a, proof_c, sizeof(proof_c), proof_a) == 0 &&
                   ring_auth_hs_proof(c, proof_a, sizeof(proof_a), NULL) == 0
               ? 0 : -1;
}

static void check_tags(void)
{
    /* two ends of one connection, and a second connection; the endpoints are
     * only keys of the tables here, never used */
    static char ep_a, ep_b, ep_c;
    ring_tp_ep_t *conn = (ring_tp_ep_t *)&ep_a, *conn_b = (ring_tp_ep_t *)&ep_b;
    ring_tp_ep_t *other = (ring_tp_ep_t *)&ep_c;
    ring_frame_macs_t *left = ring_frame_macs_new(), *right = ring_frame_macs_new();
    ring_auth_key_t key;
    ring_auth_hs_t c1, a1, c2, a2;
    unsigned char payload[1000], hdr[RING_FRAME_BYTES + RING_FRAME_TRAILER_BYTES];
    unsigned char h1[sizeof(hdr)], h2[sizeof(hdr)], h3[sizeof(hdr)];

    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (unsigned char)(i * 7 + 3);
    ok(left != NULL && right != NULL &&
       ring_auth_key_from(SECRET, strlen(SECRET), &key) == RING_OK &&
       handshake(&key, &c1, &a1) == 0 && handshake(&key, &c2, &a2) == 0 &&
       ring_frame_macs_attach(left, conn, &c1, 1) == RING_OK &&
       ring_frame_macs_attach(right, conn_b, &a1, 0) == RING_OK &&
       ring_frame_macs_attach(right, other, &a2, 0) == RING_OK,
       "keys for a connection's two ends (from a real handshake), and for another connection");
    if (left == NULL || right == NULL)
        return;
    ok(ring_frame_macs_seal(left, other, hdr, payload, NULL, 10) != 0,
       "a connection without keys cannot seal");

    seal_frame(left, conn, h1, payload, sizeof(payload), 1);
    ok(ring_frame_macs_open(right, conn_b, h1, payload, sizeof(payload), 0) == 0,
       "the other end opens it");
    ok(ring_frame_macs_open(right, conn_b, h1, payload, sizeof(payload), 0) != 0,
       "the same frame again (a replay) is refused");

    seal_frame(left, conn, h2, payload, sizeof(payload), 2);
    seal_frame(left, conn, h3, payload, sizeof(payload), 3);
    payload[500] ^= 0x40;
    ok(ring_frame_macs_open(right, conn_b, h2, payload, sizeof(payload), 0) != 0,
       "one payload bit changed: refused");
    payload[500] ^= 0x40;
    memcpy(hdr, h2, sizeof(hdr));
    hdr[20] ^= 1;
    ok(ring_frame_macs_open(right, conn_b, hdr, payload, sizeof(payload), 0) != 0,
       "one header bit changed: refused");
    memcpy(hdr, h2, sizeof(hdr));
    hdr[RING_FRAME_BYTES + 8 + 15] ^= 0x80;
    ok(ring_frame_macs_open(right, conn_b, hdr, payload, sizeof(payload), 0) != 0,
       "one tag bit changed: refused");
    ok(ring_frame_macs_open(right, conn_b, h2, payload, sizeof(payload) - 1, 0) != 0,
       "a payload cut short: refused");
    ok(ring_frame_macs_open(right, other, h2, payload, sizeof(payload), 0) != 0,
       "another connection's keys: refused");
    /* an urgent notice may overtake queued frames: a later counter is accepted... */
    ok(ring_frame_macs_open(right, conn_b, h3, payload, sizeof(payload), 0) == 0,
       "a later frame that overtook an earlier one opens");
    /* ...and the overtaken one, older now, is not */
    ok(ring_frame_macs_open(right, conn_b, h2, payload, sizeof(payload), 0) != 0,
       "an older counter after a newer one: refused");

    /* the other direction has its own key: a frame reflected back is refused */
    seal_frame(left, conn, h1, payload, 64, 4);
    ring_frame_macs_free(left);
    left = ring_frame_macs_new();
    ok(left != NULL && ring_frame_macs_attach(left, conn, &c1, 1) == RING_OK &&
           ring_frame_macs_open(left, conn, h1, payload, 64, 0) != 0,
       "a frame sent back to its sender (reflected): refused");
    seal_frame(right, conn_b, h2, NULL, 0, 5);
    ok(ring_frame_macs_open(left, conn, h2, NULL, 0, 0) == 0,
       "a notice without payload, the other way: opens");
    ring_frame_macs_free(left);
    ring_frame_macs_free(right);
}

/* --auth encrypt: the payload on the wire is ciphertext; it opens to the plaintext
 * on the other end, in place, and only there. */
static void check_sealed(void)
{
    static char ep_a, ep_b;
    ring_tp_ep_t *conn = (ring_tp_ep_t *)&ep_a, *conn_b = (ring_tp_ep_t *)&ep_b;
    ring_frame_macs_t *left = ring_frame_macs_new(), *right = ring_frame_macs_new();
    ring_auth_key_t key;
    ring_auth_hs_t c1, a1;
    unsigned char plain[4096], wire[4096], hdr[RING_FRAME_BYTES + RING_FRAME_TRAILER_BYTES];
    unsigned char h2[sizeof(hdr)];
    size_t same = 0;

    for (size_t i = 0; i < sizeof(plain); i++)
        plain[i] = (unsigned char)(i % 251);
    ok(left != NULL && right != NULL &&
           ring_auth_key_from(SECRET, strlen(SECRET), &key) == RING_OK &&
           handshake(&key, &c1, &a1) == 0 &&
           ring_frame_macs_attach(left, conn, &c1, 1) == RING_OK &&
           ring_frame_macs_attach(right, conn_b, &a1, 0) == RING_OK,
       "encrypt: keys for both ends");
    if (left == NULL || right == NULL)
        return;
    {
        ring_frame_t f = {.type = RING_FRAME_DATA, .chunk = 1, .flags = RING_FRAME_SEALED,
                          .payload_bytes = sizeof(plain)};
        ring_frame_encode(&f, hdr);
        memcpy(h2, hdr, sizeof(hdr));
    }
    ok(ring_frame_macs_seal(left, conn, hdr, plain, wire, sizeof(plain)) == 0,
       "encrypt: a 4 KiB payload sealed");
    for (size_t i = 0; i < sizeof(plain); i++)
        same += wire[i] == plain[i];
    ok(same < sizeof(plain) / 64, "encrypt: what goes on the wire is not the payload (%zu of "
       "%zu bytes equal, chance is ~16)", same, sizeof(plain));
    {
        unsigned char copy[sizeof(wire)];

        memcpy(copy, wire, sizeof(wire));
        ok(ring_frame_macs_open(right, conn_b, hdr, copy, sizeof(copy), 0) != 0,
           "encrypt: opened as a tag-only frame it is refused (the tag covers ciphertext)");
        memcpy(copy, wire, sizeof(wire));
        copy[1000] ^= 0x01;
        ok(ring_frame_macs_open(right, conn_b, hdr, copy, sizeof(copy), 1) != 0,
           "encrypt: one ciphertext bit changed: refused");
    }
    ok(ring_frame_macs_open(right, conn_b, hdr, wire, sizeof(wire), 1) == 0 &&
           memcmp(wire, plain, sizeof(plain)) == 0,
       "encrypt: the other end decrypts it in place to the payload");
    ok(ring_frame_macs_open(right, conn_b, hdr, wire, sizeof(wire), 1) != 0,
       "encrypt: the same frame again (a replay) is refused before it is touched");
    /* the other direction's key: the sender cannot open its own frame */
    ok(ring_frame_macs_seal(left, conn, h2, plain, wire, sizeof(plain)) == 0 &&
           ring_frame_macs_open(left, conn, h2, wire, sizeof(wire), 1) != 0,
       "encrypt: a frame reflected to its sender does not open");
    ring_auth_hs_wipe(&c1);
    ring_auth_hs_wipe(&a1);
    ring_frame_macs_free(left);
    ring_frame_macs_free(right);
}

/* ---- real rings ------------------------------------------------------------------ */

typedef enum { R_RIGHT, R_MISMATCH, R_ALTERED, R_RIGHT_ENC, R_MISMATCH_ENC, R_ALTERED_ENC } ring_case_t;

static int ring_main(int rank, int n, const ring_config_t *cfg, void *arg)
{
    ring_case_t kind = *(const ring_case_t *)arg;
    ring_config_t c16 = *cfg;
    ring_comm_t *comm, *comm16 = NULL;
    static float x[COUNT], y[COUNT];
    static unsigned char bytes[3 * 4099], block[4099];
    ring_status_t st;
    uint64_t bad = 0;

    if (kind == R_ALTERED && rank == 1)
        setenv("RING_FAULT", "frame-tag", 1);
    st = ring_comm_open(cfg, &comm);
    if (st != RING_OK) {
        h_put(V_STATUS, (uint64_t)st);
        return h_fail(st, "ring_comm_open");
    }
    for (int i = 0; i < COUNT; i++)
        x[i] = (float)((i % 1000) * (rank + 1));
    st = ring_allreduce(comm, x, x, COUNT, RING_FLOAT32, RING_SUM);
    for (int i = 0; st == RING_OK && i < COUNT; i++)
        bad += x[i] != (float)((i % 1000) * 6);
    /* a broadcast from rank 2 and an allgather: every byte travels tagged */
    for (size_t i = 0; st == RING_OK && i < sizeof(block); i++)
        block[i] = (unsigned char)(rank == 2 ? i * 13 : 0);
    if (st == RING_OK)
        st = ring_broadcast(comm, block, sizeof(block), 2);
    for (size_t i = 0; st == RING_OK && i < sizeof(block); i++)
        bad += block[i] != (unsigned char)(i * 13);
    for (size_t i = 0; st == RING_OK && i < sizeof(block); i++)
        block[i] = (unsigned char)(rank * 31 + i);
    if (st == RING_OK)
        st = ring_allgather(comm, block, bytes, sizeof(block));
    for (int r = 0; st == RING_OK && r < n; r++)
        for (size_t i = 0; i < sizeof(block); i++)
            bad += bytes[r * sizeof(block) + i] != (unsigned char)(r * 31 + i);
    /* fp16 on the wire with lz4: the tags cover the compressed chunks */
    if (st == RING_OK && ring_config_set(&c16, "codec", "fp16", RING_SRC_API) == RING_OK &&
        ring_config_set(&c16, "lz4", "on", RING_SRC_API) == RING_OK) {
        ring_comm_close(comm);
        comm = NULL;
        st = ring_comm_open(&c16, &comm16);
        for (int i = 0; i < COUNT; i++)
            y[i] = i % 4 == 0 ? 0.5f * (float)(rank + 1) : 0.0f; /* zeros: lz4 bites */
        if (st == RING_OK)
            st = ring_allreduce(comm16, y, y, COUNT, RING_FLOAT32, RING_SUM);
        for (int i = 0; st == RING_OK && i < COUNT; i++)
            bad += y[i] != (i % 4 == 0 ? 3.0f : 0.0f);
    }
    h_put(V_STATUS, (uint64_t)st);
    h_put(V_BAD, bad);
    if (st != RING_OK)
        h_fail(st, "collective");
    if (comm != NULL)
        ring_comm_close(comm);
    if (comm16 != NULL)
        ring_comm_close(comm16);
    return st == RING_OK && bad == 0 ? 0 : 1;
}

static void run_ring(const char *label, ring_case_t kind)
{
    static const h_setting_t frames[] = {{-1, "secret", SECRET}, {-1, "auth", "frames"},
                                         {-1, "channels", "2"}, {-1, "tcp-streams", "2"},
                                         {-1, "chunk-size", "64K"}, {0, NULL, NULL}};
    static const h_setting_t mismatch[] = {{-1, "secret", SECRET}, {-1, "auth", "frames"},
                                           {1, "auth", "connect"}, {0, NULL, NULL}};
    /* one connection a neighbour: the refusing peer's ABORT reaches the next one before
     * its close does (with several streams the close may come first on another one) */
    static const h_setting_t altered[] = {{-1, "secret", SECRET}, {-1, "auth", "frames"},
                                          {-1, "chunk-size", "64K"}, {0, NULL, NULL}};
    static const h_setting_t enc[] = {{-1, "secret", SECRET}, {-1, "auth", "encrypt"},
                                      {-1, "channels", "2"}, {-1, "tcp-streams", "2"},
                                      {-1, "chunk-size", "64K"}, {0, NULL, NULL}};
    static const h_setting_t mismatch_enc[] = {{-1, "secret", SECRET}, {-1, "auth", "encrypt"},
                                               {1, "auth", "frames"}, {0, NULL, NULL}};
    static const h_setting_t altered_enc[] = {{-1, "secret", SECRET}, {-1, "auth", "encrypt"},
                                              {-1, "chunk-size", "64K"}, {0, NULL, NULL}};
    int encrypt = kind >= R_RIGHT_ENC;
    ring_case_t base = encrypt ? (ring_case_t)(kind - R_RIGHT_ENC) : kind;
    h_spec_t spec = {.n = 3, .fn = ring_main, .arg = &base, .child_timeout = 30,
                     .connect_timeout = base == R_MISMATCH ? "3s" : "10s", .timeout = "5s",
                     .settings = base == R_MISMATCH  ? (encrypt ? mismatch_enc : mismatch)
                                 : base == R_ALTERED ? (encrypt ? altered_enc : altered)
                                 : encrypt           ? enc
                                                     : frames};
    h_run_t *run = calloc(1, sizeof(*run));
    int all = 1;

    if (run == NULL || h_run(&spec, run) != 0) {
        ok(0, "%s: the ring ran", label);
        free(run);
        return;
    }
    for (int r = 0; r < 3; r++) {
        const h_result_t *res = &run->r[r];

        if (base == R_RIGHT)
            all &= res->exited && res->code == 0 && h_val(res, V_BAD, 1) == 0;
        else if (base == R_MISMATCH) /* rank 1 and the neighbour it met first name it; the
                                        * other may only see rank 1 go */
            all &= res->exited && res->code != 0 && res->t_end < 15 &&
                   (r != 1 || strstr(res->msg, "frame authentication") != NULL);
        else /* the altered frame: every peer fails, naming the tag from rank 1 */
            all &= res->exited && res->code != 0 && res->t_end < 15 &&
                   strstr(res->msg, "valid tag") != NULL && strstr(res->msg, "rank 1 (") != NULL;
    }
    if (base == R_MISMATCH) /* besides rank 1, one of its neighbours at least */
        all &= strstr(run->r[0].msg, "frame authentication") != NULL ||
               strstr(run->r[2].msg, "frame authentication") != NULL;
    if (!ok(all, "%s", label))
        h_diag(run);
    else
        diag("%s: rank 2: %s", label, run->r[2].msg[0] != '\0' ? run->r[2].msg : "ok");
    free(run);
}

static void check_needs_secret(void)
{
    ring_config_t cfg;
    ring_comm_t *comm = NULL;
    ring_status_t st;

    ring_config_init(&cfg);
    st = ring_config_set(&cfg, "world-size", "1", RING_SRC_API);
    if (st == RING_OK)
        st = ring_config_set(&cfg, "rank", "0", RING_SRC_API);
    if (st == RING_OK)
        st = ring_config_set(&cfg, "auth", "frames", RING_SRC_API);
    if (st == RING_OK)
        st = ring_comm_open(&cfg, &comm);
    ok(st == RING_ERR_INVALID && strstr(ring_last_error(), "secret") != NULL,
       "--auth frames without a secret is refused, naming the fix: %s", ring_last_error());
    if (comm != NULL)
        ring_comm_close(comm);
    ring_config_free(&cfg);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    check_tags();
    check_sealed();
    check_needs_secret();
    run_ring("N=3 --auth frames, 2 channels x 2 streams: fp32 allreduce, broadcast, allgather "
             "and fp16+lz4 allreduce all right", R_RIGHT);
    run_ring("N=3, rank 1 without --auth frames: the start-up names frame authentication",
             R_MISMATCH);
    run_ring("N=3, rank 1's third frame altered after tagging: refused by its receiver, every "
             "peer fails naming the tag and rank 1, no hang", R_ALTERED);
    run_ring("N=3 --auth encrypt, 2 channels x 2 streams: fp32 allreduce, broadcast, allgather "
             "and fp16+lz4 allreduce all right", R_RIGHT_ENC);
    run_ring("N=3, rank 1 with --auth frames among encrypt: the start-up names frame "
             "authentication", R_MISMATCH_ENC);
    run_ring("N=3 --auth encrypt, rank 1's third frame altered after sealing: refused, every "
             "peer names the tag and rank 1, no hang", R_ALTERED_ENC);
    done_testing();
}
