/*
 * progress.c - what a trainer prints: a progress bar with ETA when stdout
 * is a terminal, plain lines (at most one per --log-interval, and one per
 * epoch) when it is not, and the summary table at the end. Only rank 0
 * prints, unless --log-all; other ranks stay quiet.
 *
 * Every figure has one definition in every mode (progress.h): samples/s
 * count all peers' samples, the time shares split this peer's trainer
 * thread's wall time and add up to 100 %, and "saved" compares the bytes
 * sent with the same gradient allreduces in fp32.
 *
 * One training run per process, so the between-lines state is file-local.
 */
#include "ring_build.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "daemon/daemon.h"
#include "daemon/elastic.h"
#include "daemon/progress.h"

static struct {
    int style;                /* PROGRESS_BAR, _LINES or _OFF once started */
    double last_print;        /* when the last line or bar was drawn */
    double at_time;           /* interval start: time, samples, wire bytes and the clocks */
    uint64_t at_samples, at_wire;
    double at_compute, at_comm, at_wait, at_engine;
    uint64_t at_epoch;
    int bar_drawn;            /* a bar is on the terminal's last line */
    uint64_t total_steps;     /* for the bar's percentage and ETA (run_t's) */
    uint64_t start_samples;   /* all peers' samples when this run started (a resume's) */
    uint64_t epoch_samples;   /* all peers' samples in one epoch */
    double engine_comm_s;     /* bounded/async: the engine thread's allreduces so far */
    uint64_t gradient_allreduces; /* bounded/async: the rounds' (set at the end) */
} pg;

void progress_engine_comm(double comm_s)
{
    pg.engine_comm_s = comm_s;
}

void progress_gradient_allreduces(uint64_t count)
{
    pg.gradient_allreduces = count;
}

/* The ring's codec as its word ("fp16"), as --print-config shows it. */
static const char *codec_word(const run_t *r, char *buf, size_t len)
{
    if (ring_config_get(r->cfg, "codec", buf, len) != RING_OK)
        snprintf(buf, len, "?");
    return buf;
}

static void clear_bar(void)
{
    if (pg.bar_drawn) {
        fputs("\r\033[K", stdout);
        pg.bar_drawn = 0;
    }
}

void progress_start(const run_t *r)
{
    const daemon_opts_t *o = r->opt;
    uint64_t per_epoch = shard_steps_per_epoch(&r->shard, o->batch_size);
    char codec[16];

    memset(&pg, 0, sizeof(pg));
    pg.style = o->progress;
    if (pg.style == PROGRESS_AUTO)
        pg.style = isatty(STDOUT_FILENO) ? PROGRESS_BAR : PROGRESS_LINES;
    if (!r->chatty)
        pg.style = PROGRESS_OFF;
    pg.total_steps = r->total_steps;
    if (o->max_steps > 0 && (uint64_t)o->max_steps < pg.total_steps)
        pg.total_steps = (uint64_t)o->max_steps;
    pg.last_print = pg.at_time = r->t_start;
    pg.at_samples = pg.start_samples = r->total_samples;
    pg.epoch_samples = per_epoch * (uint64_t)o->batch_size * (uint64_t)r->world;
    pg.at_epoch = r->epoch;
    if (pg.style != PROGRESS_OFF) {
        printf("ringd: training %s (%zu parameters) on %d peer%s%s%s, codec %s, batch %d per "
               "peer, %" PRIu64 " steps per epoch%s\n",
               r->w->shape, r->w->nparams, r->world, r->world > 1 ? "s" : "",
               r->comm != NULL && r->world > 1 ? " over " : "",
               r->comm != NULL && r->world > 1 ? ring_comm_transport(r->comm) : "",
               codec_word(r, codec, sizeof(codec)), o->batch_size, per_epoch,
               r->step > 0 ? " (resumed)" : "");
        fflush(stdout);
    }
}

void progress_chatty(const run_t *r)
{
    if (pg.style != PROGRESS_OFF || !r->chatty || r->opt->progress == PROGRESS_OFF)
        return;
    pg.style = r->opt->progress;
    if (pg.style == PROGRESS_AUTO)
        pg.style = isatty(STDOUT_FILENO) ? PROGRESS_BAR : PROGRESS_LINES;
}

/* The epochs the samples of all peers have begun, at most --epochs: in lockstep the
 * epoch of every peer; in bounded/async, where peers run at their own pace (and a
 * shared budget ends a step or two past the last epoch), the ring's as a whole. */
static uint64_t epochs_begun(const run_t *r)
{
    uint64_t e;

    if (pg.epoch_samples == 0)
        return r->epoch + (r->step_in_epoch > 0);
    e = (r->total_samples + pg.epoch_samples - 1) / pg.epoch_samples;
    return e < (uint64_t)r->opt->epochs ? e : (uint64_t)r->opt->epochs;
}

static void format_eta(double s, char *buf, size_t len)
{
    long t = (long)(s + 0.5);

    if (s < 0 || s > 360000)
        snprintf(buf, len, "--:--");
    else if (t >= 3600)
        snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

void progress_step(run_t *r)
{
    double now = ring_now(), span = now - pg.at_time;
    int epoch_changed = r->epoch != pg.at_epoch || r->stop != STOP_NONE;
    int lockstep = r->opt->mode == MODE_LOCKSTEP;
    double sps, mbps, compute, wait, comm;
    char test[32] = "", train[32] = "", shares[64];

    if (pg.style == PROGRESS_OFF)
        return;
    if (pg.style == PROGRESS_BAR ? now - pg.last_print < 0.1
                                 : now - pg.last_print < r->opt->log_interval_s && !epoch_changed)
        return;
    if (span <= 0)
        span = 1e-9;
    /* all peers' samples: lockstep adds every peer's batch each step, bounded/async the
     * peers' clocks as of the last round */
    sps = (double)(r->total_samples - pg.at_samples) / span;
    mbps = (double)(r->wire_bytes - pg.at_wire) / span / 1e6;
    /* shares of the same wall time on the trainer thread: they add up to at most 100 % */
    compute = 100 * (r->compute_s - pg.at_compute) / span;
    wait = 100 * (r->wait_s - pg.at_wait) / span;
    comm = 100 * (r->comm_s - pg.at_comm) / span;
    if (lockstep)
        snprintf(shares, sizeof(shares), "compute %.0f%%  wait %.0f%%  comm %.0f%%", compute,
                 wait, comm);
    else /* the engine's allreduces overlap the trainer's compute: apart, after a bar */
        snprintf(shares, sizeof(shares), "compute %.0f%%  wait %.0f%%  | engine comm %.0f%%",
                 compute, wait, 100 * (pg.engine_comm_s - pg.at_engine) / span);
    if (r->test_acc >= 0)
        snprintf(test, sizeof(test), "  test %.2f%%", 100 * r->test_acc);
    /* a workload without labels (synthetic) has no accuracy to show */
    if (r->w->ntest > 0)
        snprintf(train, sizeof(train), "  train %.1f%%", 100 * r->last_train_acc);
    if (pg.style == PROGRESS_BAR) {
        double done = pg.total_steps ? (double)r->step / (double)pg.total_steps : 0;
        double rate = (double)(r->step - r->start_step) / (now - r->t_start + 1e-9);
        uint64_t epoch = pg.epoch_samples ? r->total_samples / pg.epoch_samples + 1 : r->epoch + 1;
        char bar[21], eta[24];
        int fill = (int)(done * 20);

        if (epoch > (uint64_t)r->opt->epochs)
            epoch = (uint64_t)r->opt->epochs;
        for (int k = 0; k < 20; k++)
            bar[k] = k < fill ? '#' : '.';
        bar[20] = '\0';
        format_eta(rate > 0 ? (double)(pg.total_steps - r->step) / rate : -1, eta, sizeof(eta));
        printf("\r\033[Kepoch %" PRIu64 "/%ld [%s] %3.0f%%  loss %.4f%s%s  %.0f samples/s  "
               "wire %.1f MB/s  wait %.0f%%  ETA %s",
               epoch, r->opt->epochs, bar, 100 * done, r->last_loss, train, test, sps, mbps,
               wait, eta);
        pg.bar_drawn = 1;
    } else {
        printf("epoch %" PRIu64 "/%ld  step %" PRIu64 "  loss %.4f%s%s  %.0f samples/s  "
               "wire %.1f MB/s  %s\n",
               epochs_begun(r), r->opt->epochs, r->step, r->last_loss, train, test, sps, mbps,
               shares);
    }
    fflush(stdout);
    pg.last_print = pg.at_time = now;
    pg.at_samples = r->total_samples;
    pg.at_wire = r->wire_bytes;
    pg.at_compute = r->compute_s;
    pg.at_comm = r->comm_s;
    pg.at_wait = r->wait_s;
    pg.at_engine = pg.engine_comm_s;
    pg.at_epoch = r->epoch;
}

void progress_line(const run_t *r, const char *fmt, ...)
{
    va_list ap;

    (void)r;
    if (pg.style == PROGRESS_OFF)
        return;
    clear_bar();
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static void human_bytes(double b, char *buf, size_t len)
{
    if (b >= 1e9)
        snprintf(buf, len, "%.2f GB", b / 1e9);
    else if (b >= 1e6)
        snprintf(buf, len, "%.1f MB", b / 1e6);
    else
        snprintf(buf, len, "%.0f kB", b / 1e3);
}

/* The summary's "bytes on the wire": what this peer sent, and what the codec saved
 * against the same gradient allreduces in fp32 (a ring allreduce sends 2(N-1)/N of the
 * buffer from every peer). The rounds of bounded/async merge steps, so they run fewer
 * allreduces than steps; comparing with one per step would count that as the codec's. */
static void print_wire(const run_t *r, double wall)
{
    ring_comm_stats_t s;
    uint64_t allreduces = r->opt->mode == MODE_LOCKSTEP ? r->step - r->start_step
                                                         : pg.gradient_allreduces;
    double fp32 = (double)allreduces * 2.0 * (r->world - 1) / r->world *
                  (double)r->w->nparams * 4;
    char wire[32], wire32[32], codec[16];

    human_bytes((double)r->wire_bytes, wire, sizeof(wire));
    human_bytes(fp32, wire32, sizeof(wire32));
    printf("  %-20s %s sent by rank %d (%.1f MB/s) in %" PRIu64 " gradient allreduce%s",
           "bytes on the wire", wire, r->rank, (double)r->wire_bytes / wall / 1e6, allreduces,
           allreduces == 1 ? "" : "s");
    /* --codec auto may have chosen fp32 */
    if (r->cfg->codec == RING_CFG_CODEC_NONE ||
        (r->comm != NULL && ring_comm_get_stats(r->comm, &s) == RING_OK && s.codec == 0))
        printf(", fp32\n");
    else
        printf("; in fp32 they would send ~%s: %s saved %.1f %%\n", wire32,
               codec_word(r, codec, sizeof(codec)),
               fp32 > 0 ? 100 * (1 - (double)r->wire_bytes / fp32) : 0.0);
}

/* What --codec auto chose at open (src/diag/codec_fit.c), or whether the codec
 * asked for pays over shared memory (timed at start-up, main.c). */
static void print_codec_fit(const run_t *r)
{
    ring_comm_stats_t s;
    const char *name = r->cfg->codec == RING_CFG_CODEC_BF16 ? "bf16" : "fp16";

    if (r->codec_fp32_us > 0 && r->codec_fp32_us < r->codec_wire_us)
        printf("  %-20s %s over shared memory is slower than fp32 here: a 4 MiB allreduce took "
               "%.2f ms as %s, %.2f ms as fp32 (timed at start-up); --codec auto picks per "
               "transport\n", "codec", name, r->codec_wire_us / 1e3, name,
               r->codec_fp32_us / 1e3);
    else if (r->codec_fp32_us > 0)
        printf("  %-20s %s pays over shared memory here: a 4 MiB allreduce took %.2f ms as %s, "
               "%.2f ms as fp32 (timed at start-up)\n", "codec", name, r->codec_wire_us / 1e3,
               name, r->codec_fp32_us / 1e3);
    else if (r->cfg->codec == RING_CFG_CODEC_AUTO && r->comm != NULL &&
             ring_comm_get_stats(r->comm, &s) == RING_OK && s.codec_fit_fp32_us > 0)
        printf("  %-20s auto chose %s: a %.0f MiB allreduce took %.2f ms as fp32, %.2f ms as "
               "fp16 (timed at start-up)\n", "codec", s.codec == 0 ? "fp32" : "fp16",
               (double)s.codec_fit_bytes / 1048576, (double)s.codec_fit_fp32_us / 1e3,
               (double)s.codec_fit_codec_us / 1e3);
}

void progress_summary(const run_t *r)
{
    static const char *const why[] = {"", "all epochs done", "--max-steps reached",
                                      "--max-time reached", "stopped by a signal",
                                      "a peer asked to stop (signal or --max-time)"};
    int lockstep = r->opt->mode == MODE_LOCKSTEP;
    char mode[32], whose[24] = "", codec[16];
    double wall = ring_now() - r->t_start, other;

    clear_bar();
    if (wall <= 0)
        wall = 1e-9;
    /* the trainer thread's time not in the three clocks: evaluations, checkpoints, the
     * loop itself; the remainder, so the shares add up to 100 % */
    other = wall - r->compute_s - r->wait_s - r->comm_s;
    if (other < 0)
        other = 0;
    if (r->opt->mode == MODE_BOUNDED)
        snprintf(mode, sizeof(mode), "bounded S=%ld", r->opt->staleness);
    else
        snprintf(mode, sizeof(mode), "%s", lockstep ? "lockstep" : "async");
    /* lockstep peers take the same steps; in bounded/async each its own */
    if (!lockstep)
        snprintf(whose, sizeof(whose), " on rank %d", r->rank);
    printf("\n== ringd summary: %s, %d peer%s, codec %s, %s\n", r->w->shape, r->world,
           r->world > 1 ? "s" : "", codec_word(r, codec, sizeof(codec)), mode);
    printf("  %-20s %s\n", "stopped", why[r->stop < 6 ? r->stop : 0]);
    printf("  %-20s %" PRIu64 "%s (this run %" PRIu64 "), epoch %" PRIu64 " of %ld, %" PRIu64
           " samples (all peers)\n", "steps", r->step, whose, r->step - r->start_step,
           epochs_begun(r), r->opt->epochs, r->total_samples);
    if (r->test_acc >= 0)
        printf("  %-20s %.2f %%  (loss %.4f, at step %" PRIu64 ")\n", "test accuracy",
               100 * r->test_acc, r->test_loss, r->test_step);
    if (r->time_to_85 >= 0)
        printf("  %-20s %.1f s of training\n", "time to 85 %", r->time_to_85);
    if (lockstep)
        printf("  %-20s %.1f s  (compute %.1f %%, wait for peers %.1f %%, communication %.1f %%, "
               "other %.1f %%)\n", "wall time", wall, 100 * r->compute_s / wall,
               100 * r->wait_s / wall, 100 * r->comm_s / wall, 100 * other / wall);
    else /* the engine thread's allreduces run alongside the trainer's time: given apart */
        printf("  %-20s %.1f s  (compute %.1f %%, wait for peers %.1f %%, other %.1f %%; "
               "alongside, the engine thread in allreduces %.1f %%)\n", "wall time", wall,
               100 * r->compute_s / wall, 100 * r->wait_s / wall, 100 * other / wall,
               100 * pg.engine_comm_s / wall);
    printf("  %-20s %.0f (all peers)\n", "samples/s",
           (double)(r->total_samples - pg.start_samples) / wall);
    if (r->world > 1) {
        print_wire(r, wall);
        print_codec_fit(r);
    }
    if (r->nonfinite_steps > 0)
        printf("  %-20s %" PRIu64 "\n", "skipped (inf/NaN)", r->nonfinite_steps);
    elastic_summary(r, stdout); /* --elastic: every change of the ring */
    fflush(stdout);
}

void progress_peer_wait(const run_t *r, const float *wait)
{
    int least = 0;
    double sum = 0;

    printf("  %-20s", "idle in allreduces");
    for (int p = 0; p < r->world; p++) {
        printf(" rank %d %.2f s%s", p, wait[p], p + 1 < r->world ? "," : "");
        sum += wait[p];
        if (wait[p] < wait[least])
            least = p;
    }
    /* every peer waits for a late one, which itself waits least: name it */
    if (r->world > 2 && wait[least] < 0.5 * (sum - wait[least]) / (r->world - 1))
        printf("  (rank %d waits least: the others wait for it)", least);
    /* what the idle time is part of, so it is not read as a share of its own */
    printf("; part of %s\n", r->opt->mode == MODE_LOCKSTEP ? "wait for peers + communication"
                                                            : "the engine's allreduces");
    fflush(stdout);
}

int all_finite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

void progress_diverged(const run_t *r, uint64_t step, const char *what, char *err,
                       size_t errlen)
{
    if (r->rank == 0)
        snprintf(err, errlen, "the loss diverged at step %" PRIu64 " (%s): lower --lr (now %g; "
                 "try %g)", step, what, r->opt->lr, r->opt->lr / 10);
    else
        snprintf(err, errlen, "the loss diverged at step %" PRIu64 ": lower --lr (rank 0 says "
                 "more)", step);
}
