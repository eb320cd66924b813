/*
 * agree.c - before training, every peer checks that the others train the
 * same thing. The hello only fingerprints the ring's own settings (codec,
 * chunk size...); peers started with another --lr would otherwise train to
 * exit 0 with different parameters, and another --hidden would fail only as
 * "allreduce arguments differ ... count". So each peer allgathers its
 * training settings as "name=value" lines, and every peer compares rank 0's
 * with each other rank's: the first setting that differs is named with both
 * values, the same message on every peer.
 *
 * The same holds for a failure of rank 0 alone (its checkpoints): once every
 * peer knows that it failed, rank 0 broadcasts its message, and every peer
 * stops with it, naming rank 0, instead of seeing rank 0 close its
 * communicator in the middle of the next collective (agree_root_failure).
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"

#define AGREE_BYTES 4096

/* What must be equal on every peer for the parameters to stay identical:
 * the model, the optimizer, the schedule, the data order and the mode; and
 * lockstep's in-line evaluations, which every peer joins (eval-every, eval-sync).
 * Left out on purpose: paths, devices, output, and fault injection. */
static const char *const must_agree[] = {
    "workload", "hidden", "conv", "dense", "params", "compute-ms", "compute-on",
    "mode", "staleness", "warmup-steps", "staleness-scale", "stale-lr-scale",
    "momentum-compensation", "delay-compensation", "round-update", "budget",
    "epochs", "max-steps", "batch-size", "lr", "lr-schedule", "momentum", "weight-decay",
    "seed", "shuffle", "eval-every", "eval-sync", "checkpoint-every",
};
static const char *const ring_must_agree[] = {"codec", "fp16-scaling", "error-feedback", "lz4"};

static size_t agree_text(const daemon_opts_t *opt, const ring_config_t *cfg, char *buf,
                         size_t len)
{
    size_t off = 0;
    char value[512];

    memset(buf, 0, len);
    for (size_t i = 0; i < sizeof(must_agree) / sizeof(must_agree[0]); i++)
        if (daemon_opts_get(opt, must_agree[i], value, sizeof(value)) == 0 && off < len)
            off += (size_t)snprintf(buf + off, len - off, "%s=%s\n", must_agree[i], value);
    for (size_t i = 0; i < sizeof(ring_must_agree) / sizeof(ring_must_agree[0]); i++)
        if (ring_config_get(cfg, ring_must_agree[i], value, sizeof(value)) == RING_OK &&
            off < len)
            off += (size_t)snprintf(buf + off, len - off, "%s=%s\n", ring_must_agree[i], value);
    return off;
}

/* The value of name in a text of "name=value" lines (bounded by len), into out. */
static void agree_value(const char *text, size_t len, const char *name, char *out, size_t outlen)
{
    size_t nlen = strlen(name);
    const char *p = text, *end = text + strnlen(text, len);

    snprintf(out, outlen, "(not set)");
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        size_t line = eol != NULL ? (size_t)(eol - p) : (size_t)(end - p);

        if (line > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
            snprintf(out, outlen, "%.*s", (int)(line - nlen - 1), p + nlen + 1);
            return;
        }
        p += line + 1;
    }
}

int agree_settings(ring_comm_t *comm, const daemon_opts_t *opt, const ring_config_t *cfg,
                   char *err, size_t errlen)
{
    int world = ring_comm_size(comm);
    char *mine = malloc(AGREE_BYTES), *all = malloc((size_t)world * AGREE_BYTES);
    int rc = 0;

    if (mine == NULL || all == NULL) {
        snprintf(err, errlen, "out of memory comparing the peers' settings");
        free(mine);
        free(all);
        return -1;
    }
    if (agree_text(opt, cfg, mine, AGREE_BYTES) >= AGREE_BYTES - 1) {
        snprintf(err, errlen, "the training settings are too long to compare (%d bytes)",
                 AGREE_BYTES);
        rc = -1;
    } else if (ring_allgather(comm, mine, all, AGREE_BYTES) != RING_OK) {
        snprintf(err, errlen, "comparing the peers' settings: %s", ring_last_error());
        rc = -1;
    }
    for (int r = 1; r < world && rc == 0; r++) {
        const char *a = all, *b = all + (size_t)r * AGREE_BYTES;

        if (memcmp(a, b, AGREE_BYTES) == 0)
            continue;
        /* every peer has the same texts, so every peer names the same setting */
        for (size_t i = 0; i < sizeof(must_agree) / sizeof(must_agree[0]) +
                                   sizeof(ring_must_agree) / sizeof(ring_must_agree[0]);
             i++) {
            const char *name = i < sizeof(must_agree) / sizeof(must_agree[0])
                                   ? must_agree[i]
                                   : ring_must_agree[i - sizeof(must_agree) / sizeof(must_agree[0])];
            char va[512], vb[512];

            agree_value(a, AGREE_BYTES, name, va, sizeof(va));
            agree_value(b, AGREE_BYTES, name, vb, sizeof(vb));
            if (strcmp(va, vb) != 0) {
                snprintf(err, errlen, "the peers train different things: --%s is %s on rank 0 "
                         "and %s on rank %d; every peer needs the same training settings "
                         "(the parameters would differ)", name, va, vb, r);
                rc = -1;
                break;
            }
        }
        if (rc == 0) {
            snprintf(err, errlen, "the peers' training settings differ (rank 0 and rank %d), "
                     "in a setting this build does not name: are they the same ringd version?",
                     r);
            rc = -1;
        }
    }
    free(mine);
    free(all);
    return rc;
}

int agree_root_failure(ring_comm_t *comm, const char *why, char *err, size_t errlen)
{
    char msg[DAEMON_ERR_MAX];
    int rank = ring_comm_rank(comm);

    memset(msg, 0, sizeof(msg));
    if (rank == 0)
        snprintf(msg, sizeof(msg), "%s", why);
    /* bytes move unchanged (whatever the codec); rank 0's call ends once it has sent */
    if (ring_comm_size(comm) > 1 && ring_broadcast(comm, msg, sizeof(msg), 0) != RING_OK &&
        rank != 0) {
        snprintf(err, errlen, "rank 0 failed, and its message did not arrive: %s",
                 ring_last_error());
        return -1;
    }
    msg[sizeof(msg) - 1] = '\0';
    if (rank == 0) {
        if (err != why)
            snprintf(err, errlen, "%s", msg);
    } else {
        snprintf(err, errlen, "rank 0 failed: %s", msg);
    }
    return -1;
}

int agree_root_end(ring_comm_t *comm, int failed, const char *why, const char *where,
                   char *err, size_t errlen)
{
    float flag = failed ? 1.0f : 0.0f;
    char msg[DAEMON_ERR_MAX];
    ring_request_t *req;

    if (ring_allreduce_start_flags(comm, &flag, &flag, 1, RING_FLOAT32, RING_SUM,
                                   TENSOR_ROOT_END, RING_CALL_EXACT, &req) != RING_OK ||
        ring_request_wait(req) != RING_OK) {
        if (failed) /* rank 0: its own failure first */
            snprintf(err, errlen, "%s", why);
        else
            snprintf(err, errlen, "%s, the last exchange with rank 0: %s", where,
                     ring_last_error());
        return failed ? -1 : 1;
    }
    if (flag == 0.0f)
        return 0;
    (void)agree_root_failure(comm, why, msg, sizeof(msg));
    if (ring_comm_rank(comm) != 0)
        snprintf(err, errlen, "%s: %s", where, msg);
    else
        snprintf(err, errlen, "%s", msg);
    return -1;
}
