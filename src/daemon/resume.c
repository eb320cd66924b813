/*
 * resume.c - the state every peer starts from.
 *
 * Rank 0 alone decides: it loads the newest valid checkpoint of
 * --checkpoint-dir (falling back to older ones when the newest is corrupt
 * or truncated), or keeps the fresh initialisation. It then broadcasts the
 * parameters, the optimizer's velocity and the counters to every peer, so
 * the other peers need neither the checkpoint directory (it may be local
 * to rank 0's host) nor an initialisation that happens to agree.
 *
 * The broadcast is an exact allreduce-sum in which every other peer
 * contributes -0.0: x + (-0.0) == x for every float x, -0.0 included, so
 * the sum is rank 0's bits, whatever the order of additions.
 *
 * When rank 0 cannot start (its checkpoint directory cannot be made or
 * written, a checkpoint of another model...), the counters still go out,
 * saying so, and every peer stops with rank 0's message (agree_root_failure)
 * instead of seeing it leave in the middle of the broadcast.
 */
#include "ring_build.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/daemon.h"

#define CKPT_SCAN_MAX 64

/* buf (n floats) of rank 0 onto every peer */
static int broadcast_floats(run_t *r, float *buf, size_t n, char *err, size_t errlen)
{
    ring_request_t *req;

    if (r->rank != 0)
        for (size_t i = 0; i < n; i++)
            buf[i] = -0.0f;
    if (ring_allreduce_start_flags(r->comm, buf, buf, n, RING_FLOAT32, RING_SUM,
                                   TENSOR_BROADCAST, RING_CALL_EXACT, &req) != RING_OK ||
        ring_request_wait(req) != RING_OK) {
        snprintf(err, errlen, "start-up, broadcasting rank 0's state: %s", ring_last_error());
        return -1;
    }
    return 0;
}

/* u64 counters travel as 16-bit pieces: every float holds those exactly */
static void pack_u64(float *f, uint64_t v)
{
    for (int k = 0; k < 4; k++)
        f[k] = (float)((v >> (16 * k)) & 0xffff);
}

static uint64_t unpack_u64(const float *f)
{
    uint64_t v = 0;

    for (int k = 0; k < 4; k++)
        v |= (uint64_t)f[k] << (16 * k);
    return v;
}

/* where training is: 5 counters, 20 floats */
static void pack_counters(const run_t *r, float *f)
{
    pack_u64(f + 0, r->step);
    pack_u64(f + 4, r->epoch);
    pack_u64(f + 8, r->step_in_epoch);
    pack_u64(f + 12, r->total_samples);
    pack_u64(f + 16, (uint64_t)(r->elapsed_before * 1e6));
}

static void unpack_counters(run_t *r, const float *f)
{
    r->step = unpack_u64(f + 0);
    r->epoch = unpack_u64(f + 4);
    r->step_in_epoch = unpack_u64(f + 8);
    r->total_samples = unpack_u64(f + 12);
    r->elapsed_before = (double)unpack_u64(f + 16) * 1e-6;
}

/* Rank 0: load the newest usable checkpoint into r. 0 (loaded or none), -1 error. */
static int load_newest(run_t *r, char *err, size_t errlen)
{
    const daemon_opts_t *o = r->opt;
    uint64_t steps[CKPT_SCAN_MAX];
    int n = ckpt_list(o->checkpoint_dir, steps, CKPT_SCAN_MAX, err, errlen);

    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        char path[CKPT_PATH_MAX], why[DAEMON_ERR_MAX];
        ckpt_state_t st;
        int rc;

        memset(&st, 0, sizeof(st));
        st.params = r->w->params;
        st.momentum = r->sgd.velocity;
        ckpt_path(o->checkpoint_dir, steps[i], path, sizeof(path));
        rc = ckpt_read(path, &st, 1, o->workload, r->w->shape, r->w->nparams, why, sizeof(why));
        if (rc == -2) {
            snprintf(err, errlen, "%s", why);
            return -1;
        }
        if (rc != 0) {
            /* out of the way, so that pruning cannot keep it over a good newer one */
            char aside[CKPT_PATH_MAX + 16];
            snprintf(aside, sizeof(aside), "%s.corrupt", path);
            fprintf(stderr, "ringd: warning: %s; renamed to %s; trying an older checkpoint\n",
                    why, aside);
            (void)rename(path, aside);
            r->params_dirty = 1; /* may hold part of the bad file: initialise again */
            continue;
        }
        r->step = st.step;
        r->epoch = st.epoch;
        r->step_in_epoch = st.step_in_epoch;
        r->total_samples = st.total_samples;
        r->elapsed_before = st.elapsed_s;
        fprintf(stderr, "ringd: resuming from %s: step %" PRIu64 ", epoch %" PRIu64 "\n", path,
                st.step, st.epoch + 1);
        if (st.seed != o->seed || st.world_size != (uint32_t)r->world ||
            st.batch_size != (uint32_t)o->batch_size)
            fprintf(stderr, "ringd: warning: the checkpoint was written with seed %" PRIu64
                    ", %u peers, batch size %u; this run has seed %" PRIu64 ", %d peers, "
                    "batch size %d: the data order will differ from the original run's\n",
                    st.seed, st.world_size, st.batch_size, o->seed, r->world, o->batch_size);
        return 0;
    }
    return 1; /* nothing usable */
}

/* Rank 0: the checkpoint directory made ready, and the newest checkpoint loaded
 * (--no-resume: the earlier run's set aside). 0, or -1 with err. */
static int resume_prepare(run_t *r, char *err, size_t errlen)
{
    const daemon_opts_t *o = r->opt;
    int rc = 1;

    if (o->checkpoint_dir[0] != '\0') {
        if (ckpt_dir_prepare(o->checkpoint_dir, err, errlen) != 0)
            return -1;
        if (o->resume) {
            rc = load_newest(r, err, errlen);
            if (rc < 0)
                return -1;
            if (rc == 1 && r->params_dirty) {
                /* a corrupt file was partly read into the parameters */
                workload_t *fresh;
                wl_settings_t s;
                daemon_opts_workload(o, r->cfg->launch.local_rank, &s);
                if (r->w->ops->create(&s, &fresh, err, errlen) != 0)
                    return -1;
                memcpy(r->w->params, fresh->params, r->w->nparams * sizeof(float));
                fresh->ops->destroy(fresh);
                memset(r->sgd.velocity, 0, r->w->nparams * sizeof(float));
            }
        } else {
            int moved = ckpt_set_aside(o->checkpoint_dir, err, errlen);

            if (moved < 0)
                return -1;
            if (moved > 0)
                fprintf(stderr, "ringd: --no-resume: moved %d checkpoint%s of an earlier run to "
                        "%s/" CKPT_ASIDE "; they are deleted once this run writes its first\n",
                        moved, moved > 1 ? "s" : "", o->checkpoint_dir);
            r->aside_pending = 1; /* an aside left by a run killed early goes too */
        }
    }
    return 0;
}

int resume_start(run_t *r, char *err, size_t errlen)
{
    float counters[4 * 6];
    char why[DAEMON_ERR_MAX] = "";
    int failed = r->rank == 0 && resume_prepare(r, why, sizeof(why)) != 0;

    pack_counters(r, counters);
    pack_u64(counters + 20, (uint64_t)failed); /* rank 0 cannot start: why follows */
    if (broadcast_floats(r, counters, 24, err, errlen) != 0) {
        if (failed) /* rank 0's own reason first; the peers see it leave */
            snprintf(err, errlen, "%s", why);
        return -1;
    }
    if (unpack_u64(counters + 20) != 0) {
        char msg[DAEMON_ERR_MAX];

        (void)agree_root_failure(r->comm, why, msg, sizeof(msg));
        snprintf(err, errlen, "%s%s", r->rank != 0 ? "start-up: " : "", msg);
        return -1;
    }
    if (broadcast_floats(r, r->w->params, r->w->nparams, err, errlen) != 0 ||
        broadcast_floats(r, r->sgd.velocity, r->w->nparams, err, errlen) != 0)
        return -1;
    unpack_counters(r, counters);
    r->start_step = r->step;
    return 0;
}

int resume_share_state(run_t *r, char *err, size_t errlen)
{
    float counters[4 * 5];

    pack_counters(r, counters);
    if (broadcast_floats(r, counters, 20, err, errlen) != 0 ||
        broadcast_floats(r, r->w->params, r->w->nparams, err, errlen) != 0 ||
        broadcast_floats(r, r->sgd.velocity, r->w->nparams, err, errlen) != 0)
        return -1;
    unpack_counters(r, counters);
    return 0;
}
