/*
 * checkpoint.h - training state on disk: parameters, optimizer state,
 * position in the data (step, epoch, step within the epoch; the shuffles
 * are a pure function of seed, epoch and rank, so these counters are the
 * whole data-order state) and the settings, in one file per checkpoint.
 *
 * File: DIR/ckpt-<step, 12 digits>.ringd, little-endian:
 *   "RINGDCKP" | u32 version | u32 header bytes (CKPT_HEADER_BYTES)
 *   header: u64 step, epoch, step_in_epoch, seed, nparams, total_samples;
 *           u32 world_size, batch_size, final, 0; f64 elapsed_s;
 *           char workload[32], shape[160], settings[256] (NUL-padded)
 *   f32 params[nparams] | f32 momentum[nparams] | u32 crc32 of all before
 *
 * Written atomically: a temporary file in DIR, fsync, rename, fsync of
 * DIR; a crash leaves either the old set or the new file, never half of
 * one. Readers check magic, version, sizes and the checksum.
 */
#ifndef RINGD_DAEMON_CHECKPOINT_H
#define RINGD_DAEMON_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "workloads/workload.h"

#define CKPT_VERSION 1
#define CKPT_HEADER_BYTES 544
#define CKPT_PATH_MAX 1024

typedef struct ckpt_state {
    uint64_t step;            /* optimizer steps done */
    uint64_t epoch;           /* current epoch (0-based) */
    uint64_t step_in_epoch;   /* steps of that epoch already done */
    uint64_t seed;
    uint64_t total_samples;   /* samples trained on, all peers */
    uint32_t world_size, batch_size;
    uint32_t final;           /* 1: written when training stopped */
    double elapsed_s;         /* training wall time so far, all runs */
    char workload[32];
    char shape[WL_SHAPE_MAX];
    char settings[256];       /* "lr=... momentum=..." for the record and for messages */
    size_t nparams;
    float *params;            /* nparams each: the caller's buffers (written from / read into) */
    float *momentum;
} ckpt_state_t;

/* Before training: make dir (its parent must exist) and check that files can be
 * made in it, so a bad --checkpoint-dir fails at start, not at the first
 * checkpoint. 0, or -1 with the reason in err. */
int ckpt_dir_prepare(const char *dir, char *err, size_t errlen);

/* Write st as DIR/ckpt-<step>.ringd atomically; the path written goes to path_out. */
int ckpt_write(const char *dir, const ckpt_state_t *st, char *path_out, size_t path_len,
               char *err, size_t errlen);

/*
 * Read the header of path into st (params/momentum untouched). With
 * want_body, also the parameters and momentum into st->params and
 * st->momentum, which must hold expect_nparams floats: a file with another
 * count is refused before anything is read into them.
 * Returns 0; -1 when the file is corrupt or unreadable (message in err);
 * -2 when it is intact but of another model (workload, shape or parameter
 * count differ from expect_*; message names the difference).
 */
int ckpt_read(const char *path, ckpt_state_t *st, int want_body, const char *expect_workload,
              const char *expect_shape, size_t expect_nparams, char *err, size_t errlen);

/* Steps of the checkpoints in dir, newest first (at most max). Returns how many, -1 on error. */
int ckpt_list(const char *dir, uint64_t *steps, int max, char *err, size_t errlen);

/* DIR/ckpt-<step>.ringd */
void ckpt_path(const char *dir, uint64_t step, char *buf, size_t len);

/* Delete all but the newest keep checkpoints of dir. Returns how many were deleted. */
int ckpt_prune(const char *dir, int keep);

/* --no-resume: move dir's checkpoints to dir/previous-run (the count, or -1
 * with a message), and delete them once this run has written one. */
#define CKPT_ASIDE "previous-run"
int ckpt_set_aside(const char *dir, char *err, size_t errlen);
int ckpt_drop_aside(const char *dir);

#endif /* RINGD_DAEMON_CHECKPOINT_H */
