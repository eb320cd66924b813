/*
 * t-auth-handshake.c - auth.h's handshake, message by message, in one process
 * (src/bootstrap/auth_handshake.c), attacked as a stranger without the
 * secret would:
 *   - two sides with the same secret finish, with crosswise equal traffic
 *     keys that differ per direction and per connection;
 *   - relay: a peer's challenge, handed by a stranger to another connection
 *     of the same peer (its acceptor, the store), is refused; rewriting what
 *     it names makes the proofs fail instead;
 *   - reflection: a challenge or a proof sent back to its sender is refused;
 *   - replay: a proof recorded on one connection fails on the next;
 *   - splice: a challenge with any byte changed fails the proof;
 *   - another secret, job, purpose or protocol version is refused, saying
 *     which; the decoders refuse every wrong length.
 */
#include "ring_build.h"

#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "tap.h"

#define SECRET "0123456789abcdef-t-auth-handshake"
#define JOB "t-auth-job"
#define CH RING_AUTH_CHALLENGE_BYTES
#define PR RING_AUTH_PROOF_BYTES

static ring_auth_key_t key, key2;

static ring_auth_party_t party(const ring_auth_key_t *k, const char *job, int purpose, int rank,
                               int peer)
{
    ring_auth_party_t p;

    ring_auth_party_init(&p, k, job, (ring_auth_purpose_t)purpose, rank, peer);
    return p;
}

/* A whole handshake between c (connector) and a (acceptor) in memory: 0 when
 * both finished; else -1, and which side refused in *who ('a' or 'c'). */
static int run_pair(const ring_auth_party_t *pc, const ring_auth_party_t *pa, ring_auth_hs_t *c,
                    ring_auth_hs_t *a, char *who)
{
    unsigned char ch_c[CH], ch_a[CH], proof_c[PR], proof_a[PR];

    *who = '?';
    if (ring_auth_hs_start(c, pc, 0, ch_c) != 0 || ring_auth_hs_start(a, pa, 1, NULL) != 0)
        return -1;
    if (ring_auth_hs_challenge(a, ch_c, CH, ch_a) != 0)
        return *who = 'a', -1;
    if (ring_auth_hs_challenge(c, ch_a, CH, proof_c) != 0)
        return *who = 'c', -1;
    if (ring_auth_hs_proof(a, proof_c, PR, proof_a) != 0)
        return *who = 'a', -1;
    if (ring_auth_hs_proof(c, proof_a, PR, NULL) != 0)
        return *who = 'c', -1;
    return 0;
}

static void check_honest(void)
{
    ring_auth_party_t p0 = party(&key, JOB, RING_AUTH_FOR_RING, 0, 1);
    ring_auth_party_t p1 = party(&key, JOB, RING_AUTH_FOR_RING, 1, RING_AUTH_NO_RANK);
    ring_auth_hs_t c, a, c2, a2;
    char who;

    p0.channel = 2;
    p0.stream = 1;
    ok(run_pair(&p0, &p1, &c, &a, &who) == 0 && c.done && a.done,
       "rank 0 calling rank 1 (channel 2 stream 1), one secret: both sides finish");
    ok(a.their_rank == 0 && a.channel == 2 && a.stream == 1 && c.their_rank == 1,
       "each side knows what the other proved: rank 0 on channel 2 stream 1, rank 1");
    ok(memcmp(c.key_c2a, a.key_c2a, RING_AUTH_KEY_BYTES) == 0 &&
           memcmp(c.key_a2c, a.key_a2c, RING_AUTH_KEY_BYTES) == 0,
       "both sides derive the same traffic keys");
    ok(memcmp(c.key_c2a, c.key_a2c, RING_AUTH_KEY_BYTES) != 0,
       "the two directions have different keys");
    ok(run_pair(&p0, &p1, &c2, &a2, &who) == 0 &&
           memcmp(c.key_c2a, c2.key_c2a, RING_AUTH_KEY_BYTES) != 0 &&
           memcmp(c.key_a2c, c2.key_a2c, RING_AUTH_KEY_BYTES) != 0,
       "a second connection between the same ranks gets other keys");
    ring_auth_hs_wipe(&c);
    {
        static const unsigned char zero[RING_AUTH_KEY_BYTES];
        ok(memcmp(c.key_c2a, zero, sizeof(zero)) == 0, "wiping forgets the keys");
    }
}

/* The stranger listens on rank 1's address; rank 0 calls it. */
static void check_relay(void)
{
    ring_auth_party_t p0_out = party(&key, JOB, RING_AUTH_FOR_RING, 0, 1);
    ring_auth_party_t p0_in = party(&key, JOB, RING_AUTH_FOR_RING, 0, RING_AUTH_NO_RANK);
    ring_auth_party_t store = party(&key, JOB, RING_AUTH_FOR_STORE, RING_AUTH_NO_RANK,
                                    RING_AUTH_NO_RANK);
    ring_auth_party_t boot_in = party(&key, JOB, RING_AUTH_FOR_VERBS_BOOT, 0, RING_AUTH_NO_RANK);
    ring_auth_hs_t out, in, st;
    unsigned char ch_c[CH], ch_a[CH], proof_c[PR], proof_a[PR], forged[CH];

    /* rank 0 calls "rank 1" (the stranger), which hands rank 0's challenge to rank
     * 0's own listener: the relay of issue 43 */
    ok(ring_auth_hs_start(&out, &p0_out, 0, ch_c) == 0 &&
           ring_auth_hs_start(&in, &p0_in, 1, NULL) == 0,
       "two connections of rank 0: one calling rank 1, one accepted");
    ok(ring_auth_hs_challenge(&in, ch_c, CH, ch_a) != 0 &&
           strstr(in.why, "meant for rank 1") != NULL,
       "relay: rank 0's listener refuses rank 0's own challenge, meant for rank 1 (%s)", in.why);
    /* the stranger rewrites the challenge to name rank 0 */
    memcpy(forged, ch_c, CH);
    forged[20] = 0; /* the peer rank, little-endian */
    ok(ring_auth_hs_start(&in, &p0_in, 1, NULL) == 0 &&
           ring_auth_hs_challenge(&in, forged, CH, ch_a) == 0,
       "a challenge rewritten to name rank 0 passes the listener's checks ...");
    ok(ring_auth_hs_challenge(&out, ch_a, CH, proof_c) != 0 &&
           strstr(out.why, "answered as rank 0") != NULL,
       "... but its answer, handed back, names rank 0, and rank 0 called rank 1: refused (%s)",
       out.why);
    /* the stranger rewrites the answer too, to name rank 1 */
    ok(ring_auth_hs_start(&out, &p0_out, 0, ch_c) == 0 &&
           ring_auth_hs_start(&in, &p0_in, 1, NULL) == 0,
       "again, both rewritten");
    memcpy(forged, ch_c, CH);
    forged[20] = 0;
    ok(ring_auth_hs_challenge(&in, forged, CH, ch_a) == 0,
           "the listener answers the rewritten challenge");
    memcpy(forged, ch_a, CH);
    forged[16] = 1; /* the answer's own rank: 1 */
    forged[20] = 0;
    ok(ring_auth_hs_challenge(&out, forged, CH, proof_c) == 0,
       "the caller takes the rewritten answer and proves itself ...");
    ok(ring_auth_hs_proof(&in, proof_c, PR, proof_a) != 0 &&
           strstr(in.why, "could not prove") != NULL,
       "... over a transcript the listener never saw: its proof fails there (%s)", in.why);

    /* the same relay into the store, and into a verbs bootstrap's listener */
    ok(ring_auth_hs_start(&out, &p0_out, 0, ch_c) == 0 &&
           ring_auth_hs_start(&st, &store, 1, NULL) == 0 &&
           ring_auth_hs_challenge(&st, ch_c, CH, ch_a) != 0 &&
               strstr(st.why, "a ring connection") != NULL,
       "relay to the store: a ring connection's challenge is refused there (%s)", st.why);
    ok(ring_auth_hs_start(&in, &boot_in, 1, NULL) == 0 &&
           ring_auth_hs_challenge(&in, ch_c, CH, ch_a) != 0,
       "relay to a verbs bootstrap listener: refused (%s)", in.why);
    {
        ring_auth_party_t client = party(&key, JOB, RING_AUTH_FOR_STORE, RING_AUTH_NO_RANK,
                                         RING_AUTH_NO_RANK);
        ok(ring_auth_hs_start(&st, &client, 0, ch_c) == 0 &&
               ring_auth_hs_start(&in, &p0_in, 1, NULL) == 0 &&
               ring_auth_hs_challenge(&in, ch_c, CH, ch_a) != 0,
           "a store client's challenge relayed to a ring listener: refused (%s)", in.why);
    }
}

static void check_reflect_replay_splice(void)
{
    ring_auth_party_t p0 = party(&key, JOB, RING_AUTH_FOR_RING, 0, 1);
    ring_auth_party_t p1 = party(&key, JOB, RING_AUTH_FOR_RING, 1, RING_AUTH_NO_RANK);
    ring_auth_hs_t c, a;
    unsigned char ch_c[CH], ch_a[CH], proof_c[PR], proof_a[PR], old_proof[PR], bent[CH];

    ok(ring_auth_hs_start(&c, &p0, 0, ch_c) == 0 &&
           ring_auth_hs_challenge(&c, ch_c, CH, proof_c) != 0,
       "reflection: a caller's own challenge sent back to it is refused (%s)", c.why);
    ok(ring_auth_hs_start(&c, &p0, 0, ch_c) == 0 && ring_auth_hs_start(&a, &p1, 1, NULL) == 0 &&
           ring_auth_hs_challenge(&a, ch_c, CH, ch_a) == 0 &&
           ring_auth_hs_challenge(&c, ch_a, CH, proof_c) == 0 &&
           ring_auth_hs_proof(&c, proof_c, PR, NULL) != 0,
       "reflection: the caller's own proof sent back to it is refused");
    ok(ring_auth_hs_start(&c, &p0, 0, ch_c) == 0 && ring_auth_hs_start(&a, &p1, 1, NULL) == 0 &&
           ring_auth_hs_challenge(&a, ch_c, CH, ch_a) == 0 &&
           ring_auth_hs_challenge(&c, ch_a, CH, proof_c) == 0 &&
           ring_auth_hs_proof(&a, proof_c, PR, proof_a) == 0,
       "a connection that finished, recorded by a stranger");
    memcpy(old_proof, proof_c, PR);
    ok(ring_auth_hs_start(&a, &p1, 1, NULL) == 0 &&
           ring_auth_hs_challenge(&a, ch_c, CH, ch_a) == 0 &&
           ring_auth_hs_proof(&a, old_proof, PR, proof_a) != 0,
       "replay: its challenge and proof played again to a new connection: refused");
    for (int off = 0; off < CH; off += 13) {
        int refused;

        ok(ring_auth_hs_start(&c, &p0, 0, ch_c) == 0 && ring_auth_hs_start(&a, &p1, 1, NULL) == 0,
           "splice at byte %d: start", off);
        memcpy(bent, ch_c, CH);
        bent[off] ^= 0x01;
        /* the listener may refuse the changed challenge at once, or answer it ... */
        refused = ring_auth_hs_challenge(&a, bent, CH, ch_a) != 0 ||
                  ring_auth_hs_challenge(&c, ch_a, CH, proof_c) != 0 ||
                  ring_auth_hs_proof(&a, proof_c, PR, proof_a) != 0;
        ok(refused, "splice: the caller's challenge with byte %d changed never finishes", off);
    }
}

static void check_refusals(void)
{
    ring_auth_party_t p0 = party(&key, JOB, RING_AUTH_FOR_RING, 0, 1);
    ring_auth_party_t p1 = party(&key, JOB, RING_AUTH_FOR_RING, 1, RING_AUTH_NO_RANK);
    ring_auth_party_t other_secret = party(&key2, JOB, RING_AUTH_FOR_RING, 1, RING_AUTH_NO_RANK);
    ring_auth_party_t other_job = party(&key, JOB "-2", RING_AUTH_FOR_RING, 1, RING_AUTH_NO_RANK);
    ring_auth_party_t rank2 = party(&key, JOB, RING_AUTH_FOR_RING, 2, RING_AUTH_NO_RANK);
    ring_auth_hs_t c, a;
    unsigned char ch_c[CH], ch_a[CH], v1[40];
    unsigned version = 0;
    char who;

    ok(run_pair(&p0, &other_secret, &c, &a, &who) != 0 && who == 'a' &&
           strstr(a.why, "could not prove") != NULL,
       "another secret: the listener refuses the caller's proof (%s)", a.why);
    ok(run_pair(&p0, &other_job, &c, &a, &who) != 0 && who == 'a' && a.wrong_job &&
           strstr(a.why, "another job") != NULL,
       "another job: refused at the challenge, saying so (%s)", a.why);
    ok(run_pair(&p0, &rank2, &c, &a, &who) != 0 && who == 'a',
       "rank 2 refuses a call meant for rank 1 (%s)", a.why);
    {
        ring_auth_party_t wants3 = party(&key, JOB, RING_AUTH_FOR_RING, 1, 3);
        ok(run_pair(&p0, &wants3, &c, &a, &who) != 0 && who == 'a' &&
               strstr(a.why, "answered as rank 0") == NULL,
           "a listener that expects rank 3 refuses rank 0 (%s)", a.why);
    }
    memset(v1, 0, sizeof(v1));
    memcpy(v1, "RNGA", 4);
    v1[4] = 1; /* version 1, 40 bytes: the last release's challenge */
    ok(ring_auth_other_version(v1, sizeof(v1), &version) && version == 1,
       "a version-1 challenge is recognised as another version");
    ok(ring_auth_hs_start(&a, &p1, 1, NULL) == 0 &&
           ring_auth_hs_challenge(&a, v1, sizeof(v1), ch_a) != 0 &&
           strstr(a.why, "version 1") != NULL,
       "... and refused, naming it (%s)", a.why);
    ok(ring_auth_hs_start(&c, &p0, 0, ch_c) == 0 && ring_auth_hs_start(&a, &p1, 1, NULL) == 0 &&
           ring_auth_hs_challenge(&a, ch_c, CH - 1, ch_a) != 0 &&
           ring_auth_hs_challenge(&a, ch_c, 0, ch_a) != 0,
       "a short challenge is refused");
    ok(ring_auth_hs_start(&a, &p1, 1, NULL) == 0 &&
           ring_auth_hs_challenge(&a, ch_c, CH, ch_a) == 0 &&
           ring_auth_hs_proof(&a, ch_c, PR - 1, ch_a) != 0,
       "a short proof is refused");
    {
        unsigned char zero_pub[CH];

        memcpy(zero_pub, ch_c, CH);
        memset(zero_pub + 72, 0, 32); /* a low-order X25519 point: an all-zero secret */
        ok(ring_auth_hs_start(&a, &p1, 1, NULL) == 0 &&
               ring_auth_hs_challenge(&a, zero_pub, CH, ch_a) != 0,
           "an all-zero ephemeral key is refused (%s)", a.why);
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    ok(ring_auth_key_from("short", 5, &key) == RING_ERR_INVALID, "a 5-byte secret is refused");
    ok(ring_auth_key_from(SECRET, strlen(SECRET), &key) == RING_OK &&
           ring_auth_key_from(SECRET "x", strlen(SECRET) + 1, &key2) == RING_OK &&
           memcmp(key.k, key2.k, sizeof(key.k)) != 0,
       "two secrets, two keys");
    check_honest();
    check_relay();
    check_reflect_replay_splice();
    check_refusals();
    return done_testing();
}
