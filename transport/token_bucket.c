/*
 * token_bucket.c - the send-side rate limit both transports share.
 */
#include "ring_build.h"

#include "token_bucket.h"

#include <time.h>

double ring_bucket_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ring_bucket_init(ring_bucket_t *b, double rate, double now)
{
    *b = (ring_bucket_t){0};
    if (!(rate > 0))
        return;
    b->rate = rate;
    b->burst = rate * RING_BUCKET_S > RING_BUCKET_MIN ? rate * RING_BUCKET_S : RING_BUCKET_MIN;
    /* Waiting for a full bucket would lose the tokens that arrive while
     * poll() oversleeps; half a bucket leaves 5 ms (at least) of slack while
     * keeping sends, and wake-ups, few. On a slow link, a send at least
     * every 100 ms instead, so the peer sees data trickle in (its timeout
     * counts time without progress). */
    b->quantum = b->burst / 2;
    if (b->quantum > rate * RING_BUCKET_QUANTUM_MAX_S)
        b->quantum = rate * RING_BUCKET_QUANTUM_MAX_S;
    if (b->quantum < 1)
        b->quantum = 1;
    b->tokens = b->burst;
    b->refilled = now;
}

void ring_bucket_refill(ring_bucket_t *b, double now)
{
    if (b->rate <= 0 || now <= b->refilled)
        return;
    b->tokens += (now - b->refilled) * b->rate;
    if (b->tokens > b->burst)
        b->tokens = b->burst;
    b->refilled = now;
}

double ring_bucket_delay(const ring_bucket_t *b, double queued)
{
    double need;

    if (b->rate <= 0)
        return 0;
    /* the whole queue or a quantum of it: fewer, larger sends and wake-ups
     * than a trickle of whatever just arrived; never 0 bytes, which would
     * make a 0 s delay and a busy loop */
    need = queued < b->quantum ? queued : b->quantum;
    if (need < 1)
        need = 1;
    return b->tokens >= need ? 0 : (need - b->tokens) / b->rate;
}
