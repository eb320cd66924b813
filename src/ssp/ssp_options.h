/* ssp_options.h - private to the SSP session: its options' check, and the clock limit */
#ifndef RING_SSP_OPTIONS_H
#define RING_SSP_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include <ringd/ssp.h>

/* clocks travel as floats, exact below 2^24 steps (months of training) */
#define CLOCK_MAX ((uint64_t)1 << 24)

/* RING_OK, or RING_ERR_INVALID with a message naming the option and what it takes */
ring_status_t ssp_options_check(const ring_ssp_options_t *o, size_t count);

#endif
