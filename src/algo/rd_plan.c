/*
 * rd_plan.c - who pairs with whom, and in which order, for the two
 * algorithms rd.c runs over pairs of peers.
 *
 * Recursive doubling (small buffers): at stage k a peer swaps its whole
 * running sum with the peer whose ring place differs in bit k, and both add
 * the two in the same order: log2 N steps, each moving the whole buffer.
 *
 * Rabenseifner's algorithm (mid-size buffers; Thakur, Rabenseifner and Gropp
 * 2005, Open MPI's allreduce algorithm 6): the same pairs, but at stage k
 * each of a pair sends the half of its window the other keeps and adds the
 * half it keeps (a reduce-scatter of the pair), so after log2 N stages each
 * peer holds the sum of a 1/N block; then the stages run backwards, each an
 * allgather of the pair, doubling the window until every peer holds the whole
 * sum. That is the ring's bytes (2(N-1)/N of the buffer) in 2 log2 N steps
 * instead of 2(N-1); every element is added by one peer and copied to the
 * others, so every peer holds the same bits.
 *
 * With N not a power of two, the places P2..N-1 above the largest power of
 * two P2 first hand their buffer to place i - P2 (which adds it) and get the
 * result back at the end: two steps more, in both algorithms (MPICH's fold).
 */
#include "ring_build.h"

#include "rd_int.h"

void rd_plan(rd_sched_t *plan, enum rd_algo_kind kind, int place, int size)
{
    int p2 = 1, stages = 0;

    while (p2 * 2 <= size)
        p2 *= 2, stages++;
    plan->p2 = p2;
    plan->stages = stages;
    plan->nsteps = 0;
    plan->last_sum = -1;
    if (place >= p2) {
        plan->steps[plan->nsteps++] = (rd_step_t){RD_SWAP, 0};
        plan->steps[plan->nsteps++] = (rd_step_t){RD_TAKE_RESULT, 0};
        return;
    }
    if (place + p2 < size)
        plan->steps[plan->nsteps++] = (rd_step_t){RD_SWAP, 0};
    if (kind == RD_DOUBLING) {
        for (int k = 0; k < stages; k++)
            plan->steps[plan->nsteps++] = (rd_step_t){RD_SWAP, 1 + k};
        plan->last_sum = plan->nsteps - 1;
    } else {
        for (int k = 0; k < stages; k++)
            plan->steps[plan->nsteps++] = (rd_step_t){RH_SCATTER, 1 + k};
        plan->last_sum = plan->nsteps - 1;
        for (int k = stages - 1; k >= 0; k--)
            plan->steps[plan->nsteps++] = (rd_step_t){RH_GATHER, 1 + k};
    }
    if (place + p2 < size)
        plan->steps[plan->nsteps++] = (rd_step_t){RD_GIVE_RESULT, 0};
}

int rd_partner(const rd_sched_t *plan, int place, int size, int slot)
{
    if (slot == 0) {
        if (place >= plan->p2)
            return place - plan->p2;
        return place + plan->p2 < size ? place + plan->p2 : -1;
    }
    if (place >= plan->p2 || slot - 1 >= plan->stages)
        return -1;
    return place ^ (1 << (slot - 1));
}

/* At a small buffer both are a chain of messages: the ring's 2(N-1) steps
 * against rd's log2 P2 (+ 2 for the fold), so from N = 2 on. Measured over
 * tcp (interleaved, medians of 5), 4 KiB: N = 2 rd 16 us, ring 27; N = 3 53
 * against 69. (With a notice frame on every call, before notice.c sent them
 * only from calls that wait, N = 2 and 3 gained nothing.) */
int rd_pays(int size)
{
    rd_sched_t plan;
    int most = 0;

    for (int place = 0; place < size; place++) {
        rd_plan(&plan, RD_DOUBLING, place, size);
        most = plan.nsteps > most ? plan.nsteps : most;
    }
    return most < 2 * (size - 1);
}

int rh_pays(int size)
{
    return size >= 4 && (size & (size - 1)) == 0;
}

void rh_window(int place, int stage, size_t padded, size_t *off, size_t *len)
{
    *off = 0;
    *len = padded;
    for (int j = 0; j < stage; j++) {
        *len /= 2;
        if (place & (1 << j))
            *off += *len;
    }
}
