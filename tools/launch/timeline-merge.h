/* timeline-merge.h - merge the per-rank trace-event files that libringd's
 * --timeline writes into one trace (ring-launch --timeline, --merge-timeline). */
#ifndef RING_TIMELINE_MERGE_H
#define RING_TIMELINE_MERGE_H

/*
 * Merge the events of the files in[0..nin) into out, written through a
 * temporary file and renamed, in the JSON Object Format:
 * {"traceEvents":[...], "displayTimeUnit":"ms", "otherData":{...}}.
 * The inputs are read line by line as libringd writes them (one event per
 * line, in a JSON array, the closing "]" possibly missing); a merged file is
 * an input too. A torn line (a rank killed while writing) is skipped with a
 * warning. Timestamps move by one offset, so that the job's first event is
 * at 0; the inputs' clocks are taken as one (CLOCK_MONOTONIC: true on one
 * host, not across hosts). Metadata events keep ts 0.
 * Returns 0, with the number of events written in *events_p, or -1 after
 * printing why on stderr (prefixed "prog: ").
 */
int tl_merge_files(const char *out, char *const *in, int nin, const char *prog, long *events_p);

#endif /* RING_TIMELINE_MERGE_H */
