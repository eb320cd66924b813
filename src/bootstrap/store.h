/*
 * store.h - the small key-value stores peers meet through (rendezvous.c):
 * set a key, wait for a key, ask whether a key exists. Two kinds:
 *
 *   tcp   rank 0 runs a server thread (store_server.c) for the life of
 *         the communicator; every peer, rank 0 too, is a client
 *         (store_tcp.c). Its wire format is below.
 *   file  one file per key in DIR/JOB/, written atomically (temporary
 *         file, fsync, rename), polled by the readers (store_file.c),
 *         like Gloo's FileStore.
 *
 * Both are scoped by the job id: two jobs never see each other's keys, and
 * a client of the tcp store from another job is refused, told why.
 *
 * The tcp wire format, little-endian. A request is
 *   "RKV1", op (1 byte), key length (2 bytes), value length (4 bytes),
 *   key, value
 * with op 'H' hello (key = job id; the first request), 'S' set (refused
 * for a key another client set: two peers claiming one rank), 'G' get
 * (answered when the key exists), 'C' check. A reply is
 *   "RKV1", status (1 byte), length (4 bytes), data
 * with status 'O' done, 'V' the value, 'N' no such key, 'E' an error text,
 * 'F' the store is full (an error text; the connection is closed).
 * store_proto.h encodes and decodes them (both sides use it; it is fuzzed).
 *
 * With a secret, auth.h's handshake comes first (purpose "store": no rank on
 * either side). Where its challenge is due, the server may instead turn a
 * client away with "RNGR" and a 4-byte reason, then close: BUSY (it holds
 * its maximum of connections, every one authenticated: connect again later)
 * or JOB (the challenge names another job). Neither tells a stranger anything
 * about the job. A client it drops to make room (not proven yet) hears BUSY
 * too, where its challenge or its proof is due; without a secret, where the
 * hello's reply is due. A client turned away with BUSY connects again.
 */
#ifndef RING_STORE_H
#define RING_STORE_H

#include <stddef.h>

#include <ringd/status.h>

#define RING_STORE_MAGIC "RKV1"
#define RING_STORE_REQ_HDR 11
#define RING_STORE_REP_HDR 9
#define RING_STORE_KEY_MAX 512
#define RING_STORE_VALUE_MAX 65536
#define RING_STORE_REFUSE_BYTES 8
#define RING_STORE_REFUSE_BUSY 1
#define RING_STORE_REFUSE_JOB 2

typedef struct ring_store ring_store_t;

/* Which store an ops table is (where says it in words). */
typedef enum ring_store_kind {
    RING_STORE_TCP = 1,
    RING_STORE_FILE
} ring_store_kind_t;

typedef struct ring_store_ops {
    ring_store_kind_t kind;
    ring_status_t (*set)(ring_store_t *s, const char *key, const char *value);
    /* Wait until key exists, at most until deadline (ring_now() time):
     * RING_ERR_TIMED_OUT then, without a message. */
    ring_status_t (*get)(ring_store_t *s, const char *key, char *value, size_t len,
                         double deadline);
    ring_status_t (*check)(ring_store_t *s, const char *key, int *present);
    /* clean: the owner of a file store removes the job's files (after a
     * rendezvous that worked; after a failed one they stay for the others,
     * and the next run's peers read again a record whose address refuses) */
    void (*close)(ring_store_t *s, int clean);
} ring_store_ops_t;

struct ring_store {
    const ring_store_ops_t *ops;
    char where[300];   /* "tcp://host:port" or "file:///dir", for messages */
};

/* Connect to the tcp store at host:port for job, retrying until deadline
 * (the server may not be up yet). With a key (key->on), auth.h's
 * challenge-response comes first, as on ring connections. */
struct ring_auth_key;
ring_status_t ring_store_tcp_open(const char *host, int port, const char *job,
                                  const struct ring_auth_key *key, double deadline,
                                  ring_store_t **s_p);
/* The same on a socket already connected to a store (fd is the store's from
 * now on, closed on failure): where names it in messages, op_timeout bounds
 * the opening, each set and each check. For tests/fuzz/fuzz-store-client.c,
 * which plays the server over a socketpair. */
ring_status_t ring_store_tcp_open_fd(int fd, const char *where, const char *job,
                                     const struct ring_auth_key *key, double op_timeout,
                                     ring_store_t **s_p);

/* The server side: listen on host:port (host's address when it is this
 * machine's, e.g. loopback only for 127.0.0.1; else every address) and serve
 * job's keys in a thread until ring_store_server_stop, or until all world
 * peers' clients said hello and left (bounds: store_server.c). world < 0:
 * an elastic ring of -world peers for now, which others may join later: it
 * serves until stopped, with room for 4 x -world peers. With a key, a client must prove the
 * secret before anything else: one that cannot is dropped, told nothing. */
typedef struct ring_store_server ring_store_server_t;
ring_status_t ring_store_server_start(const char *host, int port, const char *job, int world,
                                      const struct ring_auth_key *key,
                                      ring_store_server_t **srv_p);
/* Stop serving; clients still waiting for a key are told why (NULL: nothing). */
void ring_store_server_stop(ring_store_server_t *srv, const char *why);

/* The same server in the caller's thread, with no socket of its own (for
 * tests/fuzz/fuzz-store-server.c, whose clients are socketpairs): _add gives
 * it a connected client's fd (0, or -1 when it has its maximum: fd closed),
 * _turn runs one turn of its loop (poll at most timeout_ms, read, answer,
 * drop): 0, or 1 when it would end. ring_store_server_stop frees it. */
ring_status_t ring_store_server_new(const char *job, int world,
                                    const struct ring_auth_key *key,
                                    ring_store_server_t **srv_p);
int ring_store_server_add(ring_store_server_t *srv, int fd);
int ring_store_server_turn(ring_store_server_t *srv, int timeout_ms);

/* The file store in dir (created if missing, with a subdirectory per job).
 * The owner (rank 0) removes the job's files when it closes. */
ring_status_t ring_store_file_open(const char *dir, const char *job, int owner,
                                   ring_store_t **s_p);

#endif /* RING_STORE_H */
