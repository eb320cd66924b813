/*
 * hostlist.h - Slurm's compressed host lists (SLURM_STEP_NODELIST,
 * SLURM_JOB_NODELIST): "node[01-04,07],gpu-a[1-2]b[3,5],login1".
 *
 * A list is comma-separated entries outside brackets; an entry is text with
 * any number of [..] groups, each a comma list of numbers N or ranges N-M
 * (N <= M), and expands to every combination, leftmost group slowest, in
 * order. A range keeps the zero padding of its lower bound ("01-10" gives
 * 01..10; "8-10" gives 8, 9, 10). Duplicates are kept, as Slurm keeps them.
 */
#ifndef RING_HOSTLIST_H
#define RING_HOSTLIST_H

#include <stddef.h>

#define RING_HOSTLIST_MAX 65536   /* hosts one list may expand to */
#define RING_HOST_NAME_MAX 256    /* bytes of one expanded name, with the NUL */

/*
 * Expand spec into *hosts_p (an array of *n_p strings, free with
 * ring_hostlist_free). Returns 0, or -1 with the reason in err (what is
 * wrong and where, e.g. "unbalanced '[' at offset 4").
 */
int ring_hostlist_expand(const char *spec, char ***hosts_p, size_t *n_p, char *err,
                         size_t errlen);
void ring_hostlist_free(char **hosts, size_t n);

#endif /* RING_HOSTLIST_H */
