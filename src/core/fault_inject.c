/*
 * fault_inject.c - RING_FAULT: a test makes this peer misbehave on the wire,
 * without a line of test code in the data path. When RING_FAULT names a
 * wire fault, the communicator's transport is wrapped (ring_fault_wrap, at
 * open): every send passes through fault_post_send, which alters what the
 * test asked for in the frame about to leave, then hands the request to the
 * real transport.
 *
 *   RING_FAULT=lz4-corrupt  every lz4-compressed data payload is scrambled
 *                           (XOR 0xa5): the receiver must refuse it
 *   RING_FAULT=frame-tag    the third data frame's tag (--auth frames) has a
 *                           bit flipped after it was sealed, as if altered on
 *                           the way: the receiver must refuse it
 *   RING_FAULT=slow-send    the peer sleeps 100 ms after it posts each data
 *                           frame, so that it is the last out of every call
 *                           (and of ring_comm_open's set-up calls)
 *   RING_FAULT=slow-results the peer sleeps 300 ms before it passes on the
 *                           ring doctor's results, so that its right
 *                           neighbour is the last out of the doctor
 *
 * One wrapped transport per process: the tests run one communicator per peer.
 */
#include "ring_build.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm_int.h"
#include "fault_inject.h"
#include "log.h"

enum { FAULT_NONE, FAULT_LZ4_CORRUPT, FAULT_FRAME_TAG, FAULT_SLOW_SEND, FAULT_SLOW_RESULTS };

#define FAULT_SLOW_SEND_US 100000
#define FAULT_SLOW_RESULTS_US 300000

static const ring_tp_ops_t *fault_inner;
static ring_tp_ops_t fault_ops;
static int fault_kind;
static unsigned long fault_data_frames;

static ring_status_t fault_post_send(ring_tp_ep_t *ep, ring_tp_req_t *req)
{
    unsigned char *hdr = req->iov[0].iov_base;
    ring_frame_t f;

    if (req->iovcnt < 1 || req->iov[0].iov_len < RING_FRAME_BYTES ||
        ring_frame_decode(hdr, &f) != 0)
        return fault_inner->post_send(ep, req);
    if (fault_kind == FAULT_SLOW_RESULTS && f.type == RING_FRAME_DOCTOR && f.step == DOC_RESULTS)
        usleep(FAULT_SLOW_RESULTS_US);
    if (f.type != RING_FRAME_DATA)
        return fault_inner->post_send(ep, req);
    if (fault_kind == FAULT_LZ4_CORRUPT && (f.flags & RING_FRAME_LZ4) && req->iovcnt >= 2) {
        unsigned char *z = req->iov[1].iov_base;
        for (size_t i = 0; i < req->iov[1].iov_len; i++)
            z[i] ^= 0xa5;
    }
    /* the tag follows the header and the 8-byte counter (frame_mac.h) */
    if (fault_kind == FAULT_FRAME_TAG && fault_data_frames == 2 &&
        req->iov[0].iov_len >= RING_FRAME_BYTES + RING_FRAME_TRAILER_BYTES)
        hdr[RING_FRAME_BYTES + 8] ^= 1;
    fault_data_frames++;
    if (fault_kind == FAULT_SLOW_SEND) {
        ring_status_t st = fault_inner->post_send(ep, req);

        usleep(FAULT_SLOW_SEND_US);
        return st;
    }
    return fault_inner->post_send(ep, req);
}

const ring_tp_ops_t *ring_fault_wrap(const ring_tp_ops_t *ops)
{
    const char *f = getenv("RING_FAULT");

    fault_kind = f == NULL                         ? FAULT_NONE
                 : strcmp(f, "lz4-corrupt") == 0  ? FAULT_LZ4_CORRUPT
                 : strcmp(f, "frame-tag") == 0    ? FAULT_FRAME_TAG
                 : strcmp(f, "slow-send") == 0    ? FAULT_SLOW_SEND
                 : strcmp(f, "slow-results") == 0 ? FAULT_SLOW_RESULTS
                                                  : FAULT_NONE;
    if (fault_kind == FAULT_NONE || ops == NULL)
        return ops;
    fault_inner = ops;
    fault_ops = *ops;
    fault_ops.post_send = fault_post_send;
    fault_data_frames = 0;
    ring_log(RING_LOG_WARN, "RING_FAULT=%s: this peer misbehaves on the wire on purpose (tests)", f);
    return &fault_ops;
}
