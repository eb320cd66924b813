/* fuzz-text.c - libFuzzer: the text ringd reads from its environment and its
 * stores, which a user or a stranger writes: the first byte picks the parser
 * (RING_PEERS, a Slurm hostlist, TF_CONFIG, a rendezvous record, a
 * rendezvous URL, an elastic ring's admission), the rest is the text. */
#include "ring_build.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hostlist.h"
#include "launch_int.h"
#include "peers.h"
#include "rdzv_record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text, why[512];

    if (size < 1 || size > 1 << 16)
        return 0;
    text = malloc(size);
    if (text == NULL)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    switch (data[0] % 6) {
    case 0: {
        ring_peer_addr_t *addrs = NULL;
        if (ring_peers_parse(text, 1 + data[0] / 6 % 8, 29500, 29600, &addrs) == RING_OK)
            free(addrs);
        break;
    }
    case 1: {
        char **hosts = NULL;
        size_t n = 0;
        if (ring_hostlist_expand(text, &hosts, &n, why, sizeof(why)) == 0)
            ring_hostlist_free(hosts, n);
        break;
    }
    case 2: {
        ring_launch_t l;
        memset(&l, 0, sizeof(l));
        (void)ring_tf_config_parse(text, &l);
        break;
    }
    case 3: {
        rdzv_record_t rec;
        (void)ring_rdzv_record_parse(text, &rec, why, sizeof(why));
        break;
    }
    case 5: {
        rdzv_admit_t a;
        (void)ring_rdzv_admit_parse(text, &a, why, sizeof(why));
        break;
    }
    default: {
        ring_rdzv_url_t u;
        (void)ring_rdzv_url_parse(text, &u, why, sizeof(why));
    }
    }
    free(text);
    return 0;
}
