/*
 * evaluator.c - the continuous evaluator (--role evaluator): outside the
 * ring, it watches --checkpoint-dir and evaluates every checkpoint that
 * appears, in step order, on the test set, printing one line each (and a
 * metrics line with --metrics). It ends after the trainers' final
 * checkpoint, or at --max-time; a checkpoint of another model is an error.
 * Checkpoints are renamed into place whole, so a file it can read but
 * whose checksum fails is really corrupt: reported once and skipped.
 */
#include "ring_build.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "daemon/daemon.h"

#define EVAL_SCAN_MAX 4096

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

int evaluator_main(const daemon_opts_t *opt, const ring_config_t *cfg)
{
    const workload_ops_t *ops = workload_find(opt->workload);
    wl_settings_t s;
    workload_t *w;
    char err[DAEMON_ERR_MAX];
    uint64_t *steps = malloc(EVAL_SCAN_MAX * sizeof(uint64_t)), done_step = 0;
    int have_done = 0, rc = 0, evaluated = 0;
    float *scratch;
    FILE *metrics = NULL;
    double t0 = ring_now();

    daemon_opts_workload(opt, cfg->launch.local_rank, &s);
    if (steps == NULL || ops->create(&s, &w, err, sizeof(err)) != 0) {
        fprintf(stderr, "ringd evaluator: %s\n", steps == NULL ? "out of memory" : err);
        free(steps);
        return 1;
    }
    if (w->ntest == 0) {
        fprintf(stderr, "ringd evaluator: the %s workload has no test set to evaluate\n",
                opt->workload);
        w->ops->destroy(w);
        free(steps);
        return 2;
    }
    scratch = malloc(w->nparams * sizeof(float));
    if (scratch == NULL || metrics_open(opt, 0, &metrics, err, sizeof(err)) != 0) {
        fprintf(stderr, "ringd evaluator: %s\n", scratch == NULL ? "out of memory" : err);
        rc = 1;
        goto out;
    }
    printf("ringd evaluator: watching %s for %s checkpoints (every %gs)\n", opt->checkpoint_dir,
           w->shape, opt->poll_interval_s);
    fflush(stdout);
    signals_install();
    for (;;) {
        int n = ckpt_list(opt->checkpoint_dir, steps, EVAL_SCAN_MAX, err, sizeof(err)), fin = 0;

        if (n < 0) {
            fprintf(stderr, "ringd evaluator: %s\n", err);
            rc = 1;
            break;
        }
        /* oldest first: the list is newest first */
        for (int i = n - 1; i >= 0 && !fin; i--) {
            char path[CKPT_PATH_MAX];
            ckpt_state_t st;
            double loss, acc;
            int r;

            if (have_done && steps[i] <= done_step)
                continue;
            ckpt_path(opt->checkpoint_dir, steps[i], path, sizeof(path));
            memset(&st, 0, sizeof(st));
            st.params = w->params;
            st.momentum = scratch;
            r = ckpt_read(path, &st, 1, opt->workload, w->shape, w->nparams, err, sizeof(err));
            have_done = 1;
            done_step = steps[i];
            if (r == -2) {
                fprintf(stderr, "ringd evaluator: %s\n", err);
                rc = 1;
                goto out;
            }
            if (r != 0) {
                /* pruned under our feet, or corrupt: say so and go on */
                fprintf(stderr, "ringd evaluator: skipping: %s\n", err);
                continue;
            }
            if (w->ops->evaluate(w, &loss, &acc, err, sizeof(err)) != 0) {
                fprintf(stderr, "ringd evaluator: %s\n", err);
                rc = 1;
                goto out;
            }
            printf("ringd evaluator: step %" PRIu64 " (epoch %" PRIu64 "): test accuracy "
                   "%.2f%%, loss %.4f%s\n", st.step, st.epoch + (st.step_in_epoch > 0),
                   100 * acc, loss, st.final ? " (final)" : "");
            fflush(stdout);
            if (metrics != NULL)
                metrics_eval(metrics, st.step, st.epoch, st.elapsed_s, loss, acc);
            evaluated++;
            fin = st.final;
        }
        if (fin)
            break;
        if (signals_stop_requested() ||
            (opt->max_time_s > 0 && ring_now() - t0 >= opt->max_time_s)) {
            printf("ringd evaluator: stopping (%s) after %d evaluation%s\n",
                   signals_stop_requested() ? "signal" : "--max-time", evaluated,
                   evaluated == 1 ? "" : "s");
            break;
        }
        sleep_s(opt->poll_interval_s);
    }
out:
    if (metrics != NULL)
        fclose(metrics);
    free(scratch);
    free(steps);
    w->ops->destroy(w);
    return rc;
}
