/*
 * suggest.h - "did you mean": the candidate closest to a mistyped word (an
 * option, a choice), by edit distance, as git and cargo suggest. Offer every
 * candidate, then ask for the best; nothing is suggested when no candidate is
 * close enough to be a typo of the word.
 */
#ifndef RING_SUGGEST_H
#define RING_SUGGEST_H

#include <stddef.h>

#define RING_SUGGEST_MAX 64 /* longer words and candidates are not compared */

typedef struct ring_suggest {
    char word[RING_SUGGEST_MAX];
    char best[RING_SUGGEST_MAX];
    int best_distance;
} ring_suggest_t;

/* Start looking for a candidate close to word[0..len). */
void ring_suggest_init(ring_suggest_t *s, const char *word, size_t len);

/* One candidate, cand[0..len). */
void ring_suggest_offer(ring_suggest_t *s, const char *cand, size_t len);

/* The '|'-separated words of list, each a candidate. */
void ring_suggest_offer_words(ring_suggest_t *s, const char *list);

/* The closest candidate, or NULL when none is close enough. */
const char *ring_suggest_best(const ring_suggest_t *s);

#endif /* RING_SUGGEST_H */
