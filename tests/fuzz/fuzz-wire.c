/* fuzz-wire.c - libFuzzer: the hello and the frame header, the first bytes a
 * ring connection and every data message decode from a peer (src/wire.c),
 * and the survivors' agreement messages (src/protocol/agree_wire.c): the
 * first two bytes pick the old ring's size, the rest is the message. */
#include "ring_build.h"

#include <stdint.h>
#include <string.h>

#include "agree_wire.h"
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
    if (size >= 2) {
        uint32_t world = 1 + ((uint32_t)data[0] | (uint32_t)data[1] << 8) % RING_AGREE_MAX_WORLD;
        ring_agree_msg_t m;
        char why[300];
        /* job hash and generation as a message made by agree_seed would carry */
        if (ring_agree_decode(data + 2, size - 2, world, 0x1234, 1, &m, why, sizeof(why)) == 0) {
            static unsigned char again[RING_AGREE_MSG_MAX];
            ring_agree_encode(&m, again); /* what decodes encodes again, to the same bytes */
            if (memcmp(again + RING_AGREE_HDR_BYTES + RING_FRAME_TRAILER_BYTES,
                       data + 2 + RING_AGREE_HDR_BYTES + RING_FRAME_TRAILER_BYTES,
                       (world + 7) / 8) != 0)
                __builtin_trap();
        }
    }
    return 0;
}
