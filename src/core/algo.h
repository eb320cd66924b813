/*
 * algo.h - the table through which the engine runs an algorithm other than the
 * ring (src/algo: hier.c, direct.c, rd.c), and what such an algorithm may call on the
 * engine: the engine modules' headers it includes (fail.h to fail naming a
 * peer, allreduce.h to progress, collectives.h, codec_pipeline.h's
 * ring_enc_wire, requests.h, timeline.h's spans). A file in src/algo includes
 * no other header of src/core (tools/dev/check-layers.py checks it), and
 * nothing reaches back up by name: src/comm_open.c installs the tables in
 * comm->algo.ops.
 */
#ifndef RING_ALGO_H
#define RING_ALGO_H

#include "comm_int.h"
#include "fail.h"
#include "allreduce.h"
#include "collectives.h"
#include "codec_pipeline.h"
#include "requests.h"
#include "timeline.h"

/* An algorithm other than the ring, run over sub-communicators (hier.c, rd.c);
 * the engine calls it through comm->algo.ops (it sits above the engine, which
 * must not call up into it by name) and asks each in turn whether it takes an
 * allreduce. */
typedef struct ring_algo_ops {
    /* 1 when it runs this allreduce (e.g. hier.c: fp32, host memory, large enough) */
    int (*takes)(const ring_comm_t *comm, const ring_request_t *req);
    ring_status_t (*begin)(ring_comm_t *comm, ring_request_t *req);
    /* advance the request under way; *finished_p = 1 once its result is in recvbuf */
    ring_status_t (*progress)(ring_comm_t *comm, ring_request_t *req, int *moved_p,
                              int *finished_p);
    /* sleep in the sub-communicator under way instead of the ring: 1 when it did
     * (0 when it has nothing under way) */
    int (*wait)(ring_comm_t *comm, int timeout_ms);
    /* NULL, or: the ring just failed (comm->fail.error is set): tell the peers it
     * reaches by other ways than the ring (rd.c: its pairs) */
    void (*on_fail)(ring_comm_t *comm);
    /* NULL, or: progress fails a request that waits too long, naming whom it
     * waits for, and this does so at once (when a neighbour asks); the ring's
     * timeout, which knows only its neighbours, stays out of it */
    ring_status_t (*fail_timeout)(ring_comm_t *comm, ring_request_t *req, double waited);
    /* 1 while it still runs the request (fail_timeout applies then) */
    int (*busy)(const ring_comm_t *comm);
    /* 1: a request that waits long sends its header to the left neighbour as an
     * empty notice frame (notice.c): a neighbour that called something else
     * (another count, dtype, collective) sees the difference, as if both ran the
     * ring; a call that does not wait sends nothing */
    int notice;
    /* 1: while busy, it waits for every peer (direct.c), so a neighbour whose
     * connection closes fails the call at once, not when the ring needs it */
    int needs_every_peer;
    /* NULL, or: called on every progress pass, whatever runs (direct.c: a
     * heartbeat on its board) */
    void (*tick)(ring_comm_t *comm);
} ring_algo_ops_t;

#endif /* RING_ALGO_H */
