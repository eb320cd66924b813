/* fuzz-auth.c - libFuzzer: the authentication messages a stranger sends
 * first (src/auth.c): the challenge, and a proof checked against a key. */
#include "ring_build.h"

#include <stdint.h>

#include "auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ring_auth_key_t key;
    unsigned char nonce[RING_AUTH_NONCE_BYTES], nc[RING_AUTH_NONCE_BYTES] = {1},
        ns[RING_AUTH_NONCE_BYTES] = {2};

    if (!key.on)
        (void)ring_auth_key_from("fuzzing-secret-0123456789", 25, &key);
    (void)ring_auth_challenge_decode(data, size, 0, nonce);
    (void)ring_auth_challenge_decode(data, size, 1, nonce);
    /* a random proof must never pass */
    if (ring_auth_proof_check(&key, 0, nc, ns, data, size) == 0)
        __builtin_trap();
    return 0;
}
