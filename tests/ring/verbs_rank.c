/*
 * verbs_rank.c - the ranks of t-verbs.c's cases (verbs_rank.h): the checked
 * allreduces (each element against the exact sum within the codec's bound,
 * see t-verbs.c), the loop a peer is killed in, an odd count, device memory
 * registered for GPUDirect, and the stranger that probes rank 0's bootstrap
 * port first (stranger_probe.c).
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/ring_cuda.h"
#include "harness.h"
#include "mix64.h"
#include "stranger_probe.h"
#include "verbs_rank.h"

/* ---- values ------------------------------------------------------------ */

/* gradient-like: [-1, 1) times 2^-4..2^3, so |x| < 8 */
static float gen(uint64_t seed, int op, int rank, size_t i)
{
    uint64_t h = mix64(mix64(seed * 31 + (uint64_t)op * 1009 + (uint64_t)rank) ^ i);
    double u = (double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0;

    return (float)(u * ldexp(1.0, (int)(h & 7) - 4));
}

static uint64_t hash_bytes(const void *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* unit roundoff of what travels */
static double codec_u(const char *codec)
{
    if (strcmp(codec, "fp16") == 0)
        return ldexp(1, -11);
    if (strcmp(codec, "bf16") == 0)
        return ldexp(1, -8);
    return 0;
}

/* ---- the ranks --------------------------------------------------------- */

static int fail_at(ring_status_t st, const char *what)
{
    h_put_double(V_FAIL_T, h_now());
    return h_fail(st, what);
}

static int check_ops(int rank, int n, ring_comm_t *comm, const vcase_t *c)
{
    double u = codec_u(c->codec);

    for (int k = 0; k < c->nops; k++) {
        const vop_t *o = &c->ops[k];
        float *buf = malloc((o->count + 1) * sizeof(float));
        size_t wrong = 0;
        double worst = 0, bmax = 8.0 * n; /* |x| < 8: a bound of every chunk's bound */
        ring_status_t st;

        if (buf == NULL)
            return fail_at(RING_ERR_NO_MEMORY, "malloc");
        for (size_t i = 0; i < o->count; i++)
            buf[i] = gen(c->seed, k, rank, i);
        st = ring_allreduce(comm, buf, buf, o->count, RING_FLOAT32, o->op);
        h_put(V_STATUS + k, (uint64_t)st);
        if (st != RING_OK) {
            free(buf);
            return fail_at(st, "ring_allreduce");
        }
        h_put(V_HASH + k, hash_bytes(buf, o->count * sizeof(float)));
        for (size_t i = 0; i < o->count; i++) {
            double s = 0, a = 0, tol, err;

            for (int r = 0; r < n; r++) {
                double x = gen(c->seed, k, r, i);
                s += x;
                a += fabs(x);
            }
            tol = n * (u + ldexp(1, -24)) * a + n * ldexp(1, -39) * bmax;
            if (o->op == RING_AVG) {
                s /= n;
                tol = tol / n + ldexp(1, -24) * a / n;
            }
            tol = tol * 1.0001 + 1e-38;
            err = fabs((double)buf[i] - s);
            if (!(err <= tol))
                wrong++;
            if (err / tol > worst)
                worst = err / tol;
        }
        h_put(V_WRONG + k, wrong);
        h_put_double(V_RATIO + k, worst);
        free(buf);
    }
    return 0;
}

/* ---- a stranger on rank 0's bootstrap port (K_STRANGER, stranger_probe.c) -- */

/* The last rank, before it opens its communicator: a stranger process probes
 * rank 0's port (rank 0 listens, waiting for this rank) and reports here. */
static int stranger_first(const ring_config_t *cfg)
{
    char peers[256];
    const char *colon;
    uint64_t res[S_COUNT];

    snprintf(peers, sizeof(peers), "%s", cfg->peers != NULL ? cfg->peers : "");
    peers[strcspn(peers, ",")] = '\0';
    colon = strrchr(peers, ':');
    if (stranger_probe_port(colon != NULL ? atoi(colon + 1) : 0, cfg->job_id, res) != 0)
        return -1;
    for (int i = 0; i < S_COUNT; i++)
        h_put(V_STRANGER + i, res[i]);
    return 0;
}

int v_child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const vcase_t *c = arg;
    ring_comm_t *comm = NULL;
    ring_status_t st;
    size_t count = c->count;
    float *buf = NULL;
    int code = 0;

    if (c->kind == K_STRANGER && rank == n - 1 && stranger_first(cfg) != 0)
        return fail_at(RING_ERR_IO, "the stranger process");
    st = ring_comm_open(cfg, &comm);
    if (st != RING_OK)
        return fail_at(st, "ring_comm_open");
    switch (c->kind) {
    case K_CHECK:
    case K_STRANGER:
        code = check_ops(rank, n, comm, c);
        break;
    case K_SIZE:
    case K_LOOP:
        if (c->kind == K_SIZE && rank == c->odd_rank)
            count = c->odd_count;
        buf = malloc(count * sizeof(float));
        if (buf == NULL) {
            code = fail_at(RING_ERR_NO_MEMORY, "malloc");
            break;
        }
        for (size_t i = 0; i < count; i++)
            buf[i] = 1.0f;
        if (c->kind == K_SIZE) {
            st = ring_allreduce(comm, buf, buf, count, RING_FLOAT32, RING_SUM);
            if (st != RING_OK)
                code = fail_at(st, "ring_allreduce");
            else
                h_msg("the allreduce of %zu floats succeeded although the counts differ", count);
        } else {
            int i;

            st = h_allreduce_loop(comm, buf, count, c->max_iters, c->max_time, 0, &i);
            if (st != RING_OK)
                code = fail_at(st, "ring_allreduce");
            h_put(V_ITERS, (uint64_t)i);
            if (code == 0)
                h_msg("finished %d allreduces without an error", i);
        }
        break;
    case K_GPUDIRECT: {
        void *dev = NULL;

        if (ring_cuda_malloc(count * sizeof(float), &dev) != 0) {
            code = fail_at(RING_ERR_NO_MEMORY, "cudaMalloc");
            break;
        }
        st = ring_comm_register(comm, dev, count * sizeof(float));
        if (st != RING_OK)
            code = fail_at(st, "ring_comm_register of device memory");
        else if ((st = ring_comm_deregister(comm, dev)) != RING_OK)
            code = fail_at(st, "ring_comm_deregister of device memory");
        else
            h_msg("registered and deregistered %zu bytes of device memory", count * 4);
        (void)ring_cuda_free(dev);
        break;
    }
    }
    free(buf);
    ring_comm_close(comm);
    return code;
}
