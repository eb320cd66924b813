/* fuzz-shm.c - libFuzzer: what a same-host peer controls in the shm transport
 * (transport/shm*.c): its offer (shm_offer_decode), and the receive pipe it
 * writes, indices included (shm_ep_progress_rx, which must fail a corrupt
 * index and never read or write out of bounds). The first byte picks which. */
#include "ring_build.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shm_int.h"
#include "tp_queue.h"

#define PIPE 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_offer(const uint8_t *data, size_t size)
{
    unsigned char m[SHM_HS_BYTES] = {0}, token[SHM_TOKEN_BYTES];
    char name[SHM_NAME_MAX];
    size_t len = size < sizeof(m) ? size : sizeof(m);
    uint32_t scope;

    memcpy(m, data, len);
    if (shm_offer_decode(m, len, token, name) != 0)
        return;
    if (strlen(name) >= SHM_NAME_MAX)
        abort(); /* the name is always terminated within its buffer */
    (void)shm_name_scope(name, &scope); /* reads within the terminated name */
}

/* input: head (8 bytes), receive capacity (2), iov count (1), then the pipe's bytes */
static void fuzz_pipe(const uint8_t *data, size_t size)
{
    static shm_ctl_t ctl;
    static unsigned char pipe[PIPE];
    ring_tp_ep_t *ep = calloc(1, sizeof(*ep));
    ring_tp_req_t req;
    uint64_t head = 0;
    size_t cap, iovs;
    unsigned char *buf;

    if (ep == NULL || size < 11) {
        free(ep);
        return;
    }
    memcpy(&head, data, 8);
    cap = (size_t)data[8] | (size_t)data[9] << 8;
    iovs = 1 + data[10] % RING_TP_IOV_MAX;
    data += 11;
    size -= 11;
    memset(pipe, 0, sizeof(pipe));
    memcpy(pipe, data, size < PIPE ? size : PIPE);
    atomic_store(&ctl.head, head);
    atomic_store(&ctl.tail, 0);
    atomic_store(&ctl.producer_sleeps, 0);
    ep->phase = SHM_PIPES;
    ep->efd_mine = ep->efd_peer = -1;
    ep->rx = (shm_pipe_t){.ctl = &ctl, .data = pipe, .size = PIPE, .mask = PIPE - 1, .pos = 0};
    buf = malloc(cap + 1); /* exactly sized: ASan sees a write past it */
    for (int round = 0; round < 4 && buf != NULL && ep->phase == SHM_PIPES; round++) {
        memset(&req, 0, sizeof(req));
        for (size_t i = 0; i < iovs; i++) {
            size_t a = cap * i / iovs, b = cap * (i + 1) / iovs;
            req.iov[i].iov_base = buf + a;
            req.iov[i].iov_len = b - a;
        }
        req.iovcnt = (int)iovs;
        ep->rq_head = ep->rq_tail = &req;
        (void)shm_ep_progress_rx(ep);
        if (!req.done)
            break;
        if (req.status == RING_OK && req.bytes > cap)
            abort(); /* a whole message larger than the receive must fail it */
    }
    ring_tp_queue_fail(&ep->rq_head, &ep->rq_tail, RING_ERR_CANCELED, 0);
    free(buf);
    free(ep);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1)
        fuzz_offer(data + 1, size - 1);
    else
        fuzz_pipe(data + 1, size - 1);
    return 0;
}
