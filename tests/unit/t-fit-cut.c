/*
 * t-fit-cut.c - ring_fit_cut (src/algo/rd_fit.c), where --rd-fit lets rd and
 * Rabenseifner's algorithm stop: from the ring's and the challenger's times
 * at growing sizes, the cut whose summed log time ratio is largest. It must
 * take every size a challenger wins throughout, none that it loses
 * throughout, stop at a real crossover, and not let one noisy size (a loss
 * among wins, a win among losses) decide, which "the last size won in a
 * row" did on a loaded 2-core VM.
 */
#include "ring_build.h"

#include <stdio.h>

#include "rd.h"
#include "tap.h"

typedef struct {
    const char *what;
    int steps;
    double secs[4][2]; /* ring, challenger */
    int want;
} cut_case_t;

static const cut_case_t cases[] = {
    {"wins at every size: all of them", 4, {{10, 5}, {20, 12}, {40, 30}, {80, 70}}, 4},
    {"loses at every size: none", 4, {{5, 10}, {12, 20}, {30, 40}, {70, 80}}, 0},
    {"wins, then a crossover: up to it", 4, {{10, 5}, {20, 15}, {40, 50}, {80, 120}}, 2},
    {"a noisy loss at the first size, clear wins after: all", 4,
     {{10, 11}, {20, 12}, {40, 25}, {80, 50}}, 4},
    {"a noisy win among losses: none", 4, {{10, 14}, {20, 19}, {40, 60}, {80, 120}}, 0},
    {"a win, then a loss: the win", 2, {{10, 9}, {20, 30}}, 1},
    {"equal times: none (the fewer on a tie)", 3, {{10, 10}, {20, 20}, {40, 40}}, 0},
    {"a size not timed ends the list", 4, {{10, 5}, {0, 0}, {40, 20}, {80, 40}}, 1},
    {"no sizes (a link too slow to fit)", 0, {{0, 0}}, 0},
};

int main(void)
{
    int n = (int)(sizeof(cases) / sizeof(cases[0]));

    plan(n);
    for (int i = 0; i < n; i++) {
        int got = ring_fit_cut((const double(*)[2])cases[i].secs, cases[i].steps);

        ok(got == cases[i].want, "%s: %d sizes (got %d)", cases[i].what, cases[i].want, got);
    }
    return done_testing();
}
