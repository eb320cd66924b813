/*
 * ssp_options.c - an SSP session's options (include/ringd/ssp.h): their
 * defaults, and the check ring_ssp_open makes before it allocates anything.
 */
#include "ring_build.h"

#include <inttypes.h>
#include <string.h>

#include <ringd/ssp.h>

#include "errors.h"
#include "ssp_options.h"

void ring_ssp_options_init(ring_ssp_options_t *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof(*o));
    o->staleness = 4;
    o->lr = 0.01;
    o->momentum = 0.9;
    o->lr_schedule = RING_LR_CONSTANT;
    /* chosen from repeated runs (docs/staleness.md, "Choosing the update rule") */
    o->update = RING_SSP_UPDATE_SUM;
    o->momentum_compensation = 1;
    o->round_idle_s = -1;
    o->fresh_wait_s = -1;
    o->gather_s = -1;
    o->warmup_late = 1.5;
    o->fresh_late = 1.25;
}

ring_status_t ssp_options_check(const ring_ssp_options_t *o, size_t count)
{
    if (o->staleness < RING_SSP_ASYNC)
        return ring_error_set(RING_ERR_INVALID, "staleness %ld: expected S >= 0, or "
                              "RING_SSP_ASYNC (-1) for no bound", o->staleness);
    if (!(o->lr >= 0) || !(o->momentum >= 0 && o->momentum < 1) || !(o->weight_decay >= 0))
        return ring_error_set(RING_ERR_INVALID, "lr %g, momentum %g, weight decay %g: expected "
                              "lr >= 0, 0 <= momentum < 1, weight decay >= 0", o->lr,
                              o->momentum, o->weight_decay);
    if ((unsigned)o->lr_schedule >= RING_LR_SCHEDULE_COUNT ||
        (unsigned)o->update >= RING_SSP_UPDATE_COUNT)
        return ring_error_set(RING_ERR_INVALID, "lr schedule %d or update rule %d: not one of "
                              "the ring_lr_schedule_t / ring_ssp_update_t values",
                              (int)o->lr_schedule, (int)o->update);
    if (!(o->warmup_late == 0 || (o->warmup_late >= 1 && o->warmup_late <= 1000)))
        return ring_error_set(RING_ERR_INVALID, "warmup_late %g: expected 0 (off) or a "
                              "multiple of the recent step time from 1 to 1000",
                              o->warmup_late);
    if (!(o->fresh_late == 0 || (o->fresh_late >= 1 && o->fresh_late <= 1000)))
        return ring_error_set(RING_ERR_INVALID, "fresh_late %g: expected 0 (off) or a "
                              "multiple of the recent step time from 1 to 1000",
                              o->fresh_late);
    if (!(o->gather_s < 0 || o->gather_s <= 1))
        return ring_error_set(RING_ERR_INVALID, "round gather (gather_s) %g: expected < 0 "
                              "(auto), 0 (off) or up to 1 s from the recent step time",
                              o->gather_s);
    if (!(o->delay_compensation >= 0))
        return ring_error_set(RING_ERR_INVALID, "delay compensation %g: expected >= 0",
                              o->delay_compensation);
    if (o->start_clock >= CLOCK_MAX)
        return ring_error_set(RING_ERR_INVALID, "start clock %" PRIu64 ": SSP sessions count "
                              "clocks up to 2^24 steps", o->start_clock);
    if (count == 0)
        return ring_error_set(RING_ERR_INVALID, "an SSP session needs at least one parameter");
    return RING_OK;
}
