/* fuzz-wire.c - libFuzzer: the hello and the frame header, the first bytes a
 * ring connection and every data message decode from a peer (src/wire.c). */
#include "ring_build.h"

#include <stdint.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char hello[RING_HELLO_BYTES] = {0}, frame[RING_FRAME_BYTES] = {0};
    ring_hello_t h;
    ring_frame_t f;

    memcpy(hello, data, size < sizeof(hello) ? size : sizeof(hello));
    memcpy(frame, data, size < sizeof(frame) ? size : sizeof(frame));
    if (ring_hello_decode(hello, &h) == 0) {
        unsigned char again[RING_HELLO_BYTES];
        ring_hello_encode(&h, again); /* what decodes encodes again */
    }
    (void)ring_frame_decode(frame, &f);
    return 0;
}
