/*
 * ringd/elastic.h - going on without a lost peer: shrink the ring in place.
 *
 * When a peer dies (SIGKILL, a crashed host) or stops answering (SIGSTOP, a
 * hung GPU) every other peer's communicator fails within the timeout with a
 * message naming it (comm.h, Errors). ring_comm_shrink then gives the
 * survivors a new communicator without it, in well under a second after a
 * crash, with no process restarted and no central process involved.
 *
 * What a failure leaves (any communicator, shrunk or not):
 * - The failed call and every request started on the communicator fail with
 *   the same sticky status; each request must still be waited for once
 *   (ring_request_wait returns at once). recvbuf of a failed allreduce is
 *   undefined: some chunks may hold partial sums. An in-place allreduce
 *   (sendbuf == recvbuf) has therefore lost its input: keep a copy of what
 *   you cannot recompute (ringd.torch's elastic state does, at each commit).
 * - Safe afterwards: ring_request_wait on its requests, ring_comm_shrink
 *   (once), the getters (rank, size, transport, stats, ring_last_error) and
 *   ring_comm_close. Everything else returns the sticky error.
 *
 * Agreement. The survivors must all end up with the same new ring even
 * when two peers die at once and a survivor knows of one only, or a peer
 * dies during the shrink. They agree peer to peer: each survivor calls the
 * next peer on the old ring that it does not count lost, their hellos carry
 * what each counts lost and every survivor adopts what it hears, so the ring
 * of survivors closes over the union; then a token from every member goes
 * once round it, and a member whose own token came back has seen exactly
 * the tokens every other member saw, and decides the same. A change during
 * that (another loss) starts a new round. A peer that is not known lost but
 * does not take part within the timeout setting counts as lost; any peer
 * counted lost by anyone is out, and is told so if it calls. With the job's
 * secret every connection of the agreement proves it first and every
 * message carries a tag, so a stranger can neither vote nor listen.
 * Then the survivors open the new ring among themselves over the same
 * transport, settings and secret (the hello checks them as at start-up).
 * The agreement and the new ring are bounded by 3 x timeout + 3 x min(timeout,
 * connect-timeout) + 2 s (src/elastic/agree.h, RING_SHRINK_BOUND): a member lost
 * after the decision makes the survivors agree once more.
 *
 * The new communicator. Ranks are renumbered 0..k-1 in the old ring's
 * order (ring_comm_parent_rank says who was who); its settings are the old
 * one's, with what the autotuner chose kept and not measured again.
 * Nothing else carries over: no request, no error feedback residual; the
 * round counter starts at 0 on every member. It can itself be shrunk.
 *
 * Growing. A ring opened with the elastic setting (--elastic on,
 * RING_ELASTIC=on) at a rendezvous store keeps the store up. A peer started
 * later with the same job, store and settings (a replacement, or one more)
 * finds the ring running there and asks to join: its ring_comm_open waits
 * (up to connect-timeout) until the members call ring_comm_grow, at a commit
 * point the application chooses (ringd: a step boundary). The joiner then
 * has the last ranks; it has no state: the application sends it (ringd
 * broadcasts parameters and optimizer state from rank 0). A joiner is held
 * to the same secret (the store's handshake, then the ring's) and the same
 * settings as the members: one whose settings differ is turned away, told
 * which setting (its ring_comm_open fails with RING_ERR_MISMATCH), and the
 * ring goes on as it was; so does it when a joiner dies before the new ring
 * is up. The tcp store lives in the process of the ring's first rank 0:
 * when that process is lost no peer can join any more (the file store has
 * no such owner).
 */
#ifndef RINGD_ELASTIC_H
#define RINGD_ELASTIC_H

#include <ringd/comm.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * After comm failed naming a lost peer (RING_ERR_REMOTE, RING_ERR_TIMED_OUT
 * or RING_ERR_IO with a rank), agree with the other survivors on who is
 * left and open the ring among them into *new_comm_p. Every survivor calls
 * it. comm must then only be closed (ring_comm_close), after or before
 * using the new one. Errors: RING_ERR_INVALID when comm has not failed, its
 * failure names no lost peer (a mismatch: shrinking would not cure it), or
 * it was shrunk already; RING_ERR_REMOTE when the others count this peer
 * lost (it answered too late): it must leave; RING_ERR_TIMED_OUT naming
 * what it waited for.
 */
RING_API
ring_status_t ring_comm_shrink(ring_comm_t *comm, ring_comm_t **new_comm_p);

/* The rank, in the communicator comm was shrunk from, of comm's rank `rank`;
 * -1 when comm was not made by ring_comm_shrink or rank is out of range. */
RING_API
int ring_comm_parent_rank(const ring_comm_t *comm, int rank);

/* How comm came to be, for logs and summaries: "shrunk from 4 to 3 peers
 * (lost rank 2 of the old ring) in 0.041 s: agreement 0.012 s, 1 round";
 * "" when comm was not made by a shrink. */
RING_API
const char *ring_comm_shrink_report(const ring_comm_t *comm);

/*
 * A commit point of an elastic ring (a collective: every member calls it at
 * the same point, with no request in flight): admit the peers waiting at the
 * rendezvous store. *new_comm_p is comm itself when nobody waits (the cost: a
 * broadcast of 8 bytes); else a new communicator in which the members keep
 * their ranks 0..k-1 and the joiners follow, and comm must then only be
 * closed. A failure of comm (a member lost) returns its sticky error: shrink.
 * RING_ERR_INVALID when comm is not elastic.
 */
RING_API
ring_status_t ring_comm_grow(ring_comm_t *comm, ring_comm_t **new_comm_p);
/* The same, admitting no more than max_size peers in all (0: no limit): a joiner
 * beyond that is turned away, told that the ring is full. */
RING_API
ring_status_t ring_comm_grow_upto(ring_comm_t *comm, int max_size, ring_comm_t **new_comm_p);

/* 1 when this peer joined a running ring (its ring_comm_open was admitted by a
 * grow): it has no state yet. After a grow, ring_comm_parent_rank is the
 * member's rank before the grow, -1 for a joiner. */
RING_API
int ring_comm_joined(const ring_comm_t *comm);

/*
 * The rendezvous store of an elastic job served by a launcher, so that it
 * outlives every rank (ring-launch --elastic does this): cfg's rendezvous
 * (tcp://HOST:PORT), job id, secret and world size (bounds: it holds room
 * for 4 x that many peers) are the ranks'. It serves in a thread until
 * ring_rendezvous_server_stop. The ranks' rank 0 finds it served and does
 * not serve one itself.
 */
typedef struct ring_rendezvous_server ring_rendezvous_server_t;
RING_API
ring_status_t ring_rendezvous_server_start(const ring_config_t *cfg,
                                           ring_rendezvous_server_t **srv_p);
RING_API
void ring_rendezvous_server_stop(ring_rendezvous_server_t *srv);

#ifdef __cplusplus
}
#endif
#endif /* RINGD_ELASTIC_H */
