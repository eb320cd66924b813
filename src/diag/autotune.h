/* autotune.h - choosing chunk size and channels on the real ring (autotune.c). */
#ifndef RING_AUTOTUNE_H
#define RING_AUTOTUNE_H

#include <stddef.h>

#include <ringd/status.h>

#include "autotune_space.h"

struct ring_comm;
/* Time every candidate, agree on rank 0's fastest, switch to it; the report
 * lands in comm->tune.desc. */
ring_status_t ring_autotune(struct ring_comm *comm);

#endif /* RING_AUTOTUNE_H */
