/* fuzz-auth.c - libFuzzer: the handshake messages a stranger sends first
 * (src/bootstrap/auth_handshake.c): a challenge to an acceptor and to a
 * connector, and a proof after a real challenge; none may pass. */
#include "ring_build.h"

#include <stdint.h>

#include "auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ring_auth_key_t key;
    ring_auth_party_t acc, con;
    ring_auth_hs_t hs;
    unsigned char ch[RING_AUTH_CHALLENGE_BYTES], out[RING_AUTH_CHALLENGE_BYTES];
    unsigned version;

    if (!key.on)
        (void)ring_auth_key_from("fuzzing-secret-0123456789", 25, &key);
    (void)ring_auth_other_version(data, size, &version);
    ring_auth_party_init(&acc, &key, "fuzzjob", RING_AUTH_FOR_RING, 1, RING_AUTH_NO_RANK);
    ring_auth_party_init(&con, &key, "fuzzjob", RING_AUTH_FOR_RING, 0, 1);
    /* as the acceptor: the input as the connector's challenge, then as its proof */
    if (ring_auth_hs_start(&hs, &acc, 1, NULL) == 0 &&
        ring_auth_hs_challenge(&hs, data, size, out) == 0 &&
        ring_auth_hs_proof(&hs, data, size, out) == 0)
        __builtin_trap(); /* a challenge cannot be its own proof */
    /* as the connector: the input as the acceptor's answer; a proof after it */
    if (ring_auth_hs_start(&hs, &con, 0, ch) == 0 &&
        ring_auth_hs_challenge(&hs, data, size, out) == 0 &&
        ring_auth_hs_proof(&hs, data + (size > 40 ? 40 : 0), size > 40 ? size - 40 : size,
                           NULL) == 0)
        __builtin_trap(); /* a random proof must never pass */
    ring_auth_hs_wipe(&hs);
    return 0;
}
