/* timeline-merge.c - the merge behind ring-launch --timeline and
 * --merge-timeline (see timeline-merge.h). No JSON library: the inputs are
 * libringd's own output, one event object per line, so a line is an event
 * exactly when it starts with '{' and ends with '}' (a trailing comma
 * aside), and its timestamp is the number after its first "ts":. */
#ifdef HAVE_CONFIG_H
#include "ring_build.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "timeline-merge.h"

/* One input's event lines, kept in memory between the two passes. */
struct tlm_input {
    char **lines;
    size_t n, cap;
};

/* The event a line holds: the line trimmed of its separator, or NULL. */
static char *tlm_event(char *line)
{
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' ||
                       line[len - 1] == ' ' || line[len - 1] == ','))
        line[--len] = '\0';
    while (*line == ' ' || *line == ',')
        line++;
    if (line[0] != '{' || len == 0 || line[strlen(line) - 1] != '}')
        return NULL;
    /* the head of a merged file, {"traceEvents":[, never ends in '}' */
    return line;
}

/* "ts":DIGITS[.DIGITS] as nanoseconds; *at points at the number. 0 when absent. */
static int tlm_ts(const char *ev, const char **at, const char **end, int64_t *ns)
{
    const char *p = strstr(ev, "\"ts\":");
    int64_t whole = 0, frac = 0;
    int digits = 0;

    if (p == NULL)
        return 0;
    p += 5;
    *at = p;
    if (*p < '0' || *p > '9')
        return 0;
    for (; *p >= '0' && *p <= '9'; p++)
        whole = whole * 10 + (*p - '0');
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            if (digits < 3) {
                frac = frac * 10 + (*p - '0');
                digits++;
            }
    if (*p != ',' && *p != '}')
        return 0; /* an exponent, or something else we did not write */
    for (; digits < 3; digits++)
        frac *= 10;
    *end = p;
    *ns = whole * 1000 + frac;
    return 1;
}

static int tlm_is_meta(const char *ev)
{
    return strstr(ev, "\"ph\":\"M\"") != NULL;
}

static int tlm_read(const char *path, struct tlm_input *in, const char *prog, int64_t *min_ns)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    long torn = 0;

    if (f == NULL) {
        fprintf(stderr, "%s: cannot read the timeline %s: %s\n", prog, path, strerror(errno));
        return -1;
    }
    while (getline(&line, &cap, f) > 0) {
        char *ev = tlm_event(line), *copy;
        const char *at, *end;
        int64_t ns;

        if (ev == NULL) {
            /* the array's brackets, the merged head and tail, or a torn line */
            torn += line[0] == '{' && strncmp(line, "{\"traceEvents\"", 14) != 0;
            continue;
        }
        if (!tlm_is_meta(ev) && tlm_ts(ev, &at, &end, &ns) && ns < *min_ns)
            *min_ns = ns;
        if (in->n == in->cap) {
            size_t ncap = in->cap ? 2 * in->cap : 1024;
            char **nl = realloc(in->lines, ncap * sizeof(*nl));
            if (nl == NULL)
                goto oom;
            in->lines = nl;
            in->cap = ncap;
        }
        if ((copy = strdup(ev)) == NULL)
            goto oom;
        in->lines[in->n++] = copy;
    }
    if (ferror(f)) {
        fprintf(stderr, "%s: reading the timeline %s: %s\n", prog, path, strerror(errno));
        fclose(f);
        free(line);
        return -1;
    }
    if (torn > 0)
        fprintf(stderr, "%s: %s: skipped %ld torn line%s (a rank killed while writing?)\n",
                prog, path, torn, torn == 1 ? "" : "s");
    fclose(f);
    free(line);
    return 0;
oom:
    fprintf(stderr, "%s: out of memory reading the timeline %s\n", prog, path);
    fclose(f);
    free(line);
    return -1;
}

/* One event, its timestamp moved back by epoch_ns (metadata keeps its 0). */
static void tlm_write_event(FILE *out, const char *ev, int64_t epoch_ns, int first)
{
    const char *at, *end;
    int64_t ns;

    fputs(first ? "" : ",\n", out);
    if (tlm_is_meta(ev) || !tlm_ts(ev, &at, &end, &ns)) {
        fputs(ev, out);
        return;
    }
    ns -= epoch_ns;
    fprintf(out, "%.*s%" PRId64 ".%03d%s", (int)(at - ev), ev, ns / 1000, (int)(ns % 1000), end);
}

int tl_merge_files(const char *out_path, char *const *in, int nin, const char *prog,
                   long *events_p)
{
    struct tlm_input *inputs = calloc((size_t)(nin > 0 ? nin : 1), sizeof(*inputs));
    int64_t epoch = INT64_MAX;
    char *tmp = NULL;
    FILE *out = NULL;
    long events = 0;
    int rc = -1;

    if (inputs == NULL || asprintf(&tmp, "%s.tmp.%ld", out_path, (long)getpid()) < 0) {
        tmp = NULL;
        fprintf(stderr, "%s: out of memory merging timelines\n", prog);
        goto done;
    }
    for (int i = 0; i < nin; i++)
        if (tlm_read(in[i], &inputs[i], prog, &epoch) != 0)
            goto done;
    if (epoch == INT64_MAX)
        epoch = 0;
    out = fopen(tmp, "w");
    if (out == NULL) {
        fprintf(stderr, "%s: cannot write the timeline %s: %s\n", prog, tmp, strerror(errno));
        goto done;
    }
    fputs("{\"traceEvents\":[\n", out);
    for (int i = 0; i < nin; i++)
        for (size_t k = 0; k < inputs[i].n; k++)
            tlm_write_event(out, inputs[i].lines[k], epoch, events++ == 0);
    fprintf(out,
            "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"merged_by\":\"ring-launch\","
            "\"inputs\":%d,\"epoch_monotonic_us\":\"%" PRId64 ".%03d\",\"clock\":\"ts is "
            "CLOCK_MONOTONIC microseconds since the first event of the job; the processes of "
            "one host share that clock, different hosts do not and are not offset\"}}\n",
            nin, epoch / 1000, (int)(epoch % 1000));
    if (fflush(out) != 0 || ferror(out) || fsync(fileno(out)) != 0) {
        fprintf(stderr, "%s: writing the timeline %s: %s\n", prog, tmp, strerror(errno));
        goto done;
    }
    if (fclose(out) != 0) {
        out = NULL;
        fprintf(stderr, "%s: writing the timeline %s: %s\n", prog, tmp, strerror(errno));
        goto done;
    }
    out = NULL;
    if (rename(tmp, out_path) != 0) {
        fprintf(stderr, "%s: cannot rename %s to %s: %s\n", prog, tmp, out_path,
                strerror(errno));
        goto done;
    }
    *events_p = events;
    rc = 0;
done:
    if (out != NULL)
        fclose(out);
    if (rc != 0 && tmp != NULL)
        (void)unlink(tmp);
    for (int i = 0; inputs != NULL && i < nin; i++) {
        for (size_t k = 0; k < inputs[i].n; k++)
            free(inputs[i].lines[k]);
        free(inputs[i].lines);
    }
    free(inputs);
    free(tmp);
    return rc;
}
