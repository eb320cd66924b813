/* fuzz-verbs-record.c - libFuzzer: the QP record a verbs peer sends at
 * bootstrap (transport/verbs_record.c). */
#include "ring_build.h"

#include <stdint.h>
#include <string.h>

#include "verbs_record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char in[VB_RECORD_BYTES] = {0};
    vb_record_t r;
    char err[256];

    memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
    (void)vb_record_decode(in, &r, err, sizeof(err));
    return 0;
}
