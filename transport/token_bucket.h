/*
 * token_bucket.h - the send-side rate limit (--rate-limit) both transports
 * share: a token bucket in bytes. tcp holds writes back with it; verbs
 * holds back the posting of RDMA writes.
 */
#ifndef RING_TOKEN_BUCKET_H
#define RING_TOKEN_BUCKET_H

#define RING_BUCKET_MIN 65536      /* smallest bucket, bytes (one verbs fragment) */
#define RING_BUCKET_S 0.01         /* bucket of this many seconds at the rate */
#define RING_BUCKET_QUANTUM_MAX_S 0.1 /* a send at least this often on a slow link */
/* control messages this small (payload bytes: an ABORT, a credit) bypass the limit,
 * running the bucket into debt, so a failure is never held back behind data */
#define RING_BUCKET_CTRL_BYTES 256

typedef struct ring_bucket {
    double rate;     /* bytes/s; 0 = no limit */
    double burst;    /* bucket size, bytes */
    double quantum;  /* smallest send worth waking up for, bytes */
    double tokens;   /* may be negative: debt from sends that bypass the limit */
    double refilled; /* CLOCK_MONOTONIC seconds of the last refill */
} ring_bucket_t;

double ring_bucket_now(void); /* CLOCK_MONOTONIC seconds */
/* A bucket for rate bytes/s (<= 0: unlimited), full at time now. */
void ring_bucket_init(ring_bucket_t *b, double rate, double now);
static inline int ring_bucket_on(const ring_bucket_t *b) { return b->rate > 0; }
/* Add what arrived since the last refill, up to the bucket's size. */
void ring_bucket_refill(ring_bucket_t *b, double now);
/* After a refill: 0 when `queued` bytes waiting to go may start now (the
 * bucket holds them all or a quantum of them), else the seconds until so. */
double ring_bucket_delay(const ring_bucket_t *b, double queued);
/* Bytes that went out (nothing, when unlimited). */
static inline void ring_bucket_take(ring_bucket_t *b, double bytes)
{
    if (b->rate > 0)
        b->tokens -= bytes;
}

#endif /* RING_TOKEN_BUCKET_H */
