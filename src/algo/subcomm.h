/*
 * subcomm.h - communicators over some of the ring's peers, opened once the
 * ring is up: hier.c's local and cross rings, rd.c's pairs (subcomm.c).
 *
 * hier.c and rd.c sit above the engine: they open these with the
 * constructor comm_open.c lends them (ring_sub_open_fn), never by name.
 */
#ifndef RING_SUBCOMM_H
#define RING_SUBCOMM_H


typedef ring_status_t (*ring_sub_open_fn)(const ring_config_t *cfg, ring_comm_t **comm_p);
typedef void (*ring_sub_close_fn)(ring_comm_t *comm);

#define RING_PORT_HOLD_MAX 40

/* Free ports on this peer's host, held by listeners (so that no other peer of
 * this host is given them) until a sub-communicator opens on one: released
 * one at a time, just before. */
typedef struct ring_port_hold {
    ring_tp_t *tp;
    ring_tp_listener_t *l[RING_PORT_HOLD_MAX];
    int n;
} ring_port_hold_t;

ring_status_t ring_port_hold(ring_port_hold_t *ph, const char *host, int n, int *ports);
/* which = -1: every port still held */
void ring_port_hold_release(ring_port_hold_t *ph, int which);

/* One sub-communicator and how messages name it. */
typedef struct ring_sub {
    ring_comm_t *comm;       /* NULL until opened */
    int *members;            /* its ranks as the ring's ranks (owned) */
    int n;
    char what[48];           /* "local ring", "pair of stage 1" */
    char map[256];           /* "0 is rank 4, 1 is rank 5" */
    ring_comm_stats_t seen;  /* its counters as last added to the ring's */
} ring_sub_t;

/* What the sub-communicators are for, in messages. */
typedef struct ring_sub_owner {
    const char *algo;        /* "hierarchical allreduce" */
    const char *avoid;       /* "--hierarchical off" */
} ring_sub_owner_t;

/*
 * Open sub as rank `me` of members[0..n-1] (the ring's ranks), each member m
 * listening on ports[m * stride + which]; job_tag makes its job id (every
 * member passes the same). settings (name, value pairs, NULL-terminated) come
 * on top of the ring's configuration. On failure sub->comm stays NULL and the
 * error names the owner, what and how to avoid it.
 */
ring_status_t ring_sub_open(ring_comm_t *comm, const ring_sub_owner_t *owner,
                            ring_sub_open_fn open_fn, ring_sub_t *sub, const char *what,
                            const int *members, int n, int me, const int *ports, int stride,
                            int which, const char *job_tag, const char *const *settings);
void ring_sub_close(ring_sub_t *sub, ring_sub_close_fn close_fn);

/* Before hier.c and rd.c close their sub-communicators after the ring failed:
 * wait 200 ms, so that the ring's ABORT naming the culprit, on its way to
 * every peer, arrives before a sub-communicator's CLOSE, which would make a
 * peer name this one instead. No wait when nothing failed or nothing is open. */
void ring_sub_linger(const ring_comm_t *comm);

/* The ring fails because a request of sub failed with st: the culprit is
 * named as the ring's rank (the sub-communicator's own number would name
 * another peer). Returns the ring's error. */
ring_status_t ring_sub_fail(ring_comm_t *comm, const ring_sub_owner_t *owner,
                            const ring_sub_t *sub, ring_status_t st);

/* Add what sub sent since the last call to the ring's counters (frames and
 * bytes; ring_comm_get_stats, the daemon's summary). */
void ring_sub_add_stats(ring_comm_t *comm, ring_sub_t *sub);

/* Collect a finished request of a sub-communicator (releasing its slot):
 * RING_ERR_NONFINITE sets *nonfinite and counts as success. */
ring_status_t ring_sub_reap(ring_comm_t *comm, const ring_sub_owner_t *owner,
                            const ring_sub_t *sub, ring_request_t *req, int *nonfinite);

#endif /* RING_SUBCOMM_H */
