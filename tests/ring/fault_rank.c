/*
 * fault_rank.c - the ranks of t-fault.c's cases (fault_rank.h): open the
 * ring, do the case's part (one allreduce, a loop to be killed or stopped in,
 * an odd count or op, a late start, a close, a timed wait) and report the
 * status, the message and the values through the harness.
 */
#include "ring_build.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fault_rank.h"
#include "harness.h"

static double cpu_seconds(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static int fail_at(ring_status_t st, const char *what)
{
    h_put_double(V_FAIL_T, h_now());
    return h_fail(st, what);
}

int f_child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const fcase_t *c = arg;
    ring_comm_t *comm = NULL;
    ring_status_t st;
    float *buf = NULL;
    size_t count = c->count;
    int code = 0;

    if (c->kind == K_HANG) {
        if (rank == 0) {
            h_msg("hello from rank %d of %d", rank, n);
            h_put(7, 0x1234567890abcdefull);
            return 3;
        }
        if (c->delay > 0)
            signal(SIGALRM, SIG_IGN); /* only the parent's deadline can end it */
        h_ready();
        for (int i = 0; i < 600; i++)
            sleep(1);
        return 0;
    }
    if (c->kind == K_DELAYED && rank == 1)
        usleep((useconds_t)(c->delay * 1e6));
    st = ring_comm_open(cfg, &comm);
    if (st != RING_OK)
        return fail_at(st, "ring_comm_open");
    if (c->kind == K_SIZE && rank == c->odd_rank)
        count = c->odd_count;
    buf = malloc((count > 0 ? count : 1) * sizeof(float));
    if (buf == NULL) {
        h_msg("out of memory");
        return 99;
    }
    for (size_t i = 0; i < count; i++)
        buf[i] = 1.0f;

    if (c->kind == K_SIZE && rank == c->odd_rank && c->delay > 0)
        usleep((useconds_t)(c->delay * 1e6)); /* late: the others' frames are already queued */
    switch (c->kind) {
    case K_OPEN:
    case K_SIZE:
        st = ring_allreduce(comm, buf, buf, count, RING_FLOAT32, RING_SUM);
        if (st != RING_OK)
            code = fail_at(st, "ring_allreduce");
        break;
    case K_LOOP: {
        int i;

        st = h_allreduce_loop(comm, buf, count, c->max_iters, c->max_time, 0, &i);
        if (st != RING_OK)
            code = fail_at(st, "ring_allreduce");
        h_put(V_ITERS, (uint64_t)i);
        if (code == 0)
            h_msg("finished %d allreduces without an error", i);
        break;
    }
    case K_DELAYED: {
        int good = 1;

        for (int k = 0; k < 3 && code == 0; k++) {
            for (size_t i = 0; i < count; i++)
                buf[i] = (float)(rank + 1) * (float)(k + 1);
            st = ring_allreduce(comm, buf, buf, count, RING_FLOAT32, RING_SUM);
            if (st != RING_OK)
                code = fail_at(st, "ring_allreduce");
            for (size_t i = 0; code == 0 && i < count; i++)
                good &= buf[i] == (float)(n * (n + 1) / 2 * (k + 1));
        }
        h_put(V_RESULT_OK, (uint64_t)(code == 0 && good));
        break;
    }
    case K_CLOSE:
        if (rank == c->closer) {
            h_ready();
            usleep((useconds_t)(c->delay * 1e6));
            h_put_double(V_CLOSE_T, h_now());
            ring_comm_close(comm);
            free(buf);
            return 0;
        }
        st = ring_allreduce(comm, buf, buf, count, RING_FLOAT32, RING_SUM);
        if (st != RING_OK)
            code = fail_at(st, "ring_allreduce");
        else
            h_msg("the allreduce succeeded although rank %d closed its communicator", c->closer);
        break;
    case K_STRANGER: {
        double t0, c0;
        int good = 1;

        if (rank == 0) {
            h_ready();
            usleep(300000); /* the stranger connects meanwhile */
        } else {
            usleep((useconds_t)(c->delay * 1e6)); /* rank 0 waits for us that long */
        }
        t0 = h_now();
        c0 = cpu_seconds();
        st = ring_allreduce(comm, buf, buf, count, RING_FLOAT32, RING_SUM);
        h_put_double(V_CPU, cpu_seconds() - c0);
        h_put_double(V_WALL, h_now() - t0);
        if (st != RING_OK)
            code = fail_at(st, "ring_allreduce");
        for (size_t i = 0; code == 0 && i < count; i++)
            good &= buf[i] == (float)n;
        h_put(V_RESULT_OK, (uint64_t)(code == 0 && good));
        break;
    }
    case K_ARGS: {
        ring_request_t *req;
        int odd = rank == c->odd_rank;

        st = ring_allreduce_start(comm, buf, buf, count, RING_FLOAT32, odd ? c->odd_op : RING_SUM,
                                  odd ? c->odd_tensor : 7, &req);
        if (st == RING_OK)
            st = ring_request_wait(req);
        if (st != RING_OK)
            code = fail_at(st, "ring_allreduce_start/wait");
        break;
    }
    case K_HANG:
        break;
    }
    free(buf);
    ring_comm_close(comm);
    return code;
}
