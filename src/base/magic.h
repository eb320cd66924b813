/*
 * magic.h - the first four bytes of every kind of message ringd sends on a
 * connection, in one place: a peer that receives the wrong kind (a tcp
 * peer's hello at a verbs bootstrap, a hello where a secret's challenge was
 * due) can say what the other side runs instead of "garbage". Little-endian
 * on the wire ("RNGH" reads 0x48474e52).
 */
#ifndef RING_MAGIC_H
#define RING_MAGIC_H

#define RING_HELLO_MAGIC 0x48474e52u      /* "RNGH": the hello (core/wire.h) */
#define RING_FRAME_MAGIC 0x46474e52u      /* "RNGF": a frame (core/wire.h) */
#define RING_AUTH_MAGIC 0x41474e52u       /* "RNGA": a challenge (bootstrap/auth.h) */
#define RING_AUTH_PROOF_MAGIC 0x50474e52u /* "RNGP": a proof (bootstrap/auth.h) */
#define RING_STORE_REFUSE_MAGIC 0x52474e52u /* "RNGR": the tcp store turns a client away
                                             * before its challenge (bootstrap/store.h) */
#define VB_RECORD_MAGIC 0x56474e52u       /* "RNGV": a verbs queue-pair record (transport/verbs_record.h) */

#endif /* RING_MAGIC_H */
