/*
 * t-cuda-staging.c - src/core/device.c's staging of device buffers, on any
 * machine, with the fake device of fake_cuda_device.c (every ring_cuda_*
 * function, so libringd's own CUDA member is never pulled in): "device
 * memory" kept PROT_NONE outside fake operations, so an engine that touched
 * a device buffer directly would crash the rank rather than pass, and
 * streams that run only when something waits for them.
 *
 * Covered: every placement (device to device, in place, device to host,
 * host to device) in rings of one and two, fp32 and half buffers, codecs,
 * two requests in flight sharing the one staging buffer, a staging buffer
 * that grows, host buffers never copied, and failed copies at begin and at
 * finish (RING_ERR_IO on that rank, the peer told), and every stream,
 * event and host registration of the library gone after ring_comm_close.
 * The real CUDA copies are tested by t-cuda where there is a GPU.
 */
#include "ring_build.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda_device.h"
#include "half.h"
#include "harness.h"
#include "tap.h"

/* ---- the fake device (fake_cuda_device.c) -------------------------------- */

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;

    if (ring_cuda_malloc(bytes, &p) != 0)
        bail("fake device memory exhausted");
    return p;
}

/* copies of the device's staging (blocking or async) since the counters were zeroed */
static uint64_t fake_copies(void)
{
    return fake_cuda_counts.d2h_copies + fake_cuda_counts.h2d_copies;
}

/* ---- allreduces with buffers where a placement says ------------------------ */

typedef enum place { P_DEV, P_DEV_INPLACE, P_DEV_TO_HOST, P_HOST_TO_DEV, P_HOST, P_COUNT } place_t;

static const char *const place_names[] = {"device to device", "device in place",
                                          "device to host", "host to device", "host"};

/* small integers: sums and averages of two are exact in every type and codec */
static float value(int rank, size_t i)
{
    return (float)((int)((i * 7u + (size_t)rank * 13u) % 61u) - 30);
}

static void put_elem(ring_dtype_t dt, void *buf, size_t i, float f)
{
    if (dt == RING_FLOAT32)
        memcpy((float *)buf + i, &f, 4);
    else
        ((uint16_t *)buf)[i] = dt == RING_FLOAT16 ? ring_f32_to_f16(f) : ring_f32_to_bf16(f);
}

typedef struct op {
    size_t count;
    ring_dtype_t dtype;
    ring_op_t op;
    place_t place;
} op_t;

/* An op's host input, expected result, result, and the buffers the allreduce gets. */
typedef struct op_bufs {
    void *in, *out, *send, *recv, *want;
    size_t bytes;
} op_bufs_t;

static void op_prepare(const op_t *o, int rank, int n, op_bufs_t *b)
{
    size_t esz = o->dtype == RING_FLOAT32 ? 4 : 2;

    b->bytes = o->count * esz;
    b->in = malloc(b->bytes + 1);
    b->out = calloc(1, b->bytes + 1);
    b->want = malloc(b->bytes + 1);
    if (b->in == NULL || b->out == NULL || b->want == NULL)
        bail("out of memory");
    for (size_t i = 0; i < o->count; i++) {
        float sum = 0;

        for (int r = 0; r < n; r++)
            sum += value(r, i);
        put_elem(o->dtype, b->in, i, value(rank, i));
        put_elem(o->dtype, b->want, i, o->op == RING_AVG ? sum / (float)n : sum);
    }
    b->send = b->in;
    b->recv = b->out;
    if (o->place != P_HOST_TO_DEV && o->place != P_HOST) {
        b->send = dev_alloc(b->bytes);
        fake_cuda_poke(b->send, b->in, b->bytes);
    }
    if (o->place == P_DEV_INPLACE)
        b->recv = b->send;
    else if (o->place == P_DEV || o->place == P_HOST_TO_DEV)
        b->recv = dev_alloc(b->bytes);
}

/* 1 when the result is right; frees the host buffers */
static int op_check(op_bufs_t *b)
{
    int good;

    if (ring_cuda_is_device_ptr(b->recv))
        fake_cuda_peek(b->out, b->recv, b->bytes);
    good = memcmp(b->out, b->want, b->bytes) == 0;
    free(b->in), free(b->out), free(b->want);
    return good;
}

/* ---- ranks ---------------------------------------------------------------- */

#define MAX_OPS 16
#define V_BAD 0       /* op i wrong: V_BAD + i */
#define V_STATUS 20   /* op i status: V_STATUS + i */
#define V_COPIES 40   /* fake copies during the host-only op */
#define V_LEAKS 41    /* streams + events + registrations left after ring_comm_close */

typedef struct tcase {
    int nops;
    op_t ops[MAX_OPS];
    int async;        /* start every op, then wait for each */
    int fail_rank;    /* this rank's copies fail ... */
    int fail_finish;  /* ... at finish (h2d) rather than at begin (d2h) */
} tcase_t;

static int rank_fn(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const tcase_t *c = arg;
    ring_comm_t *comm;
    ring_request_t *reqs[MAX_OPS];
    op_bufs_t bufs[MAX_OPS];
    ring_status_t st;
    int failed = 0;

    fake_cuda_reset();
    if ((st = ring_comm_open(cfg, &comm)) != RING_OK)
        return h_fail(st, "ring_comm_open");
    for (int i = 0; i < c->nops; i++) {
        uint64_t before;

        op_prepare(&c->ops[i], rank, n, &bufs[i]);
        before = fake_copies();
        if (rank == c->fail_rank) { /* the first copy that way fails */
            fake_cuda_knobs.fail_d2h = !c->fail_finish;
            fake_cuda_knobs.fail_h2d = c->fail_finish;
        }
        if (c->async) {
            st = ring_allreduce_start(comm, bufs[i].send, bufs[i].recv, c->ops[i].count,
                                      c->ops[i].dtype, c->ops[i].op, (uint32_t)i, &reqs[i]);
            if (st != RING_OK)
                return h_fail(st, "ring_allreduce_start");
            continue;
        }
        st = ring_allreduce(comm, bufs[i].send, bufs[i].recv, c->ops[i].count, c->ops[i].dtype,
                            c->ops[i].op);
        fake_cuda_knobs.fail_d2h = fake_cuda_knobs.fail_h2d = 0;
        h_put(V_STATUS + i, (uint64_t)st);
        if (st != RING_OK)
            h_msg("%s", ring_last_error());
        h_put(V_BAD + i, st == RING_OK ? !op_check(&bufs[i]) : 1);
        if (c->ops[i].place == P_HOST)
            h_put(V_COPIES, fake_copies() - before);
        failed |= st != RING_OK;
    }
    for (int i = 0; c->async && i < c->nops; i++) {
        st = ring_request_wait(reqs[i]);
        h_put(V_STATUS + i, (uint64_t)st);
        h_put(V_BAD + i, st == RING_OK ? !op_check(&bufs[i]) : 1);
        failed |= st != RING_OK;
    }
    ring_comm_close(comm);
    {
        fake_cuda_live_t l = fake_cuda_live();
        h_put(V_LEAKS, (uint64_t)(l.streams + l.events + l.registrations));
    }
    return failed ? 1 : 0;
}

static h_run_t the_run;

static const h_run_t *run_ring(int n, const tcase_t *c, const char *codec)
{
    h_setting_t settings[] = {{-1, "codec", codec}, {-1, "chunk-size", "64K"},
                              {-1, "timeout", "10s"}, {0, NULL, NULL}};
    h_ring_spec_t rs = {.n = n, .settings = settings, .fn = rank_fn, .arg = (void *)c,
                        .budget = 30, .run = &the_run};

    return h_run_ring(&rs);
}

/* every op right on every rank */
static void check_ring(const char *label, int n, const tcase_t *c, const char *codec)
{
    const h_run_t *run = run_ring(n, c, codec);
    int good = 1;

    for (int r = 0; r < n; r++) {
        good &= run->r[r].exited && run->r[r].code == 0;
        for (int i = 0; i < c->nops; i++)
            good &= h_val(&run->r[r], V_STATUS + i, 99) == RING_OK &&
                    h_val(&run->r[r], V_BAD + i, 1) == 0;
        good &= h_val(&run->r[r], V_LEAKS, 1) == 0;
    }
    if (!ok(good, "%s: %d peer%s, codec %s: exact on every rank", label, n, n > 1 ? "s" : "",
            codec)) {
        h_diag(run);
        for (int r = 0; r < n; r++) {
            diag("    rank %d: %llu streams, events and registrations left after close", r,
                 (unsigned long long)h_val(&run->r[r], V_LEAKS, 99));
            for (int i = 0; i < c->nops; i++)
                diag("    rank %d op %d (%s, %zu elements): status %llu, wrong %llu", r, i,
                     place_names[c->ops[i].place], c->ops[i].count,
                     (unsigned long long)h_val(&run->r[r], V_STATUS + i, 99),
                     (unsigned long long)h_val(&run->r[r], V_BAD + i, 1));
        }
    }
}

static void add(tcase_t *c, size_t count, ring_dtype_t dt, ring_op_t op, place_t p)
{
    if (c->nops == MAX_OPS)
        bail("too many ops");
    c->ops[c->nops++] = (op_t){count, dt, op, p};
}

int main(void)
{
    tcase_t every = {.fail_rank = -1}, halves = {.fail_rank = -1}, async = {.fail_rank = -1};
    tcase_t fault;
    const h_run_t *run;
    op_bufs_t b;
    op_t probe = {1000, RING_FLOAT32, RING_SUM, P_DEV};
    ring_config_t cfg;
    ring_comm_t *comm;

    plan(8);

    /* interposition works (or nothing below means anything) */
    fake_cuda_reset();
    ring_config_init(&cfg);
    if (ring_config_set(&cfg, "rank", "0", RING_SRC_API) != RING_OK ||
        ring_config_set(&cfg, "world-size", "1", RING_SRC_API) != RING_OK ||
        ring_comm_open(&cfg, &comm) != RING_OK)
        bail("ring of one: %s", ring_last_error());
    op_prepare(&probe, 0, 1, &b);
    ok(ring_allreduce(comm, b.send, b.recv, probe.count, probe.dtype, probe.op) == RING_OK &&
           fake_copies() == 2 && op_check(&b),
       "libringd stages through this program's fake device (2 copies, exact)");
    ring_comm_close(comm);
    ring_config_free(&cfg);

    /* sizes go up and down: the staging buffer grows and is reused */
    for (int p = 0; p < P_COUNT; p++) {
        add(&every, p == P_DEV ? 300007 : 100003, RING_FLOAT32, RING_SUM, (place_t)p);
        add(&every, 4099, RING_FLOAT32, RING_AVG, (place_t)p);
    }
    for (int p = 0; p < P_HOST; p++) {
        add(&halves, 50001, RING_FLOAT16, RING_SUM, (place_t)p);
        add(&halves, 4099, RING_BFLOAT16, RING_AVG, (place_t)p);
    }
    check_ring("every placement", 1, &every, "none");
    check_ring("every placement", 2, &every, "none");
    run = &the_run;
    ok(h_val(&run->r[0], V_COPIES, 1) == 0 && h_val(&run->r[1], V_COPIES, 1) == 0,
       "host buffers are never copied");
    check_ring("fp16 and bf16 buffers", 2, &halves, "fp16");

    /* several requests in flight share the staging buffer one after the other */
    async.async = 1;
    for (int i = 0; i < 6; i++)
        add(&async, 20000 + 7919 * (size_t)i, RING_FLOAT32, i % 2 ? RING_AVG : RING_SUM,
            i % 3 == 2 ? P_HOST_TO_DEV : P_DEV);
    check_ring("6 requests in flight", 2, &async, "bf16");

    /* a failed copy fails that rank with RING_ERR_IO, and the peer is told */
    for (int finish = 0; finish < 2; finish++) {
        memset(&fault, 0, sizeof(fault));
        add(&fault, 10000, RING_FLOAT32, RING_SUM, P_DEV);
        add(&fault, 10000, RING_FLOAT32, RING_SUM, P_HOST);
        fault.fail_rank = 0;
        fault.fail_finish = finish;
        run = run_ring(2, &fault, "none");
        if (!ok(h_val(&run->r[0], V_STATUS, 0) == RING_ERR_IO &&
                    strstr(run->r[0].msg, finish ? "recvbuf" : "sendbuf") != NULL &&
                    h_val(&run->r[1], V_STATUS + (finish ? 1 : 0), 0) == RING_ERR_REMOTE &&
                    strstr(run->r[1].msg, "rank 0 failed") != NULL &&
                    run->r[1].t_end < 8 && h_val(&run->r[0], V_LEAKS, 1) == 0 &&
                    h_val(&run->r[1], V_LEAKS, 1) == 0,
                "a failed copy at %s: rank 0 fails with RING_ERR_IO, rank 1 is told, "
                "nothing left after close",
                finish ? "finish (to the device recvbuf)" : "begin (from the device sendbuf)"))
            h_diag(run);
    }
    return done_testing();
}
