/* suggest.c - the closest candidate to a mistyped word (suggest.h). */
#include "ring_build.h"

#include <string.h>

#include "suggest.h"

/* Optimal string alignment distance: insertions, deletions, substitutions and
 * swaps of two neighbours ("--epcohs") each cost 1. */
static int edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    int d[RING_SUGGEST_MAX + 1][RING_SUGGEST_MAX + 1];

    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j] + 1;

            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

void ring_suggest_init(ring_suggest_t *s, const char *word, size_t len)
{
    memset(s, 0, sizeof(*s));
    if (len >= RING_SUGGEST_MAX)
        len = 0; /* too long to be a typo of anything we offer */
    memcpy(s->word, word, len);
    s->best_distance = -1;
}

void ring_suggest_offer(ring_suggest_t *s, const char *cand, size_t len)
{
    size_t wl = strlen(s->word);
    int dist, limit;

    if (wl == 0 || len == 0 || len >= RING_SUGGEST_MAX)
        return;
    /* a typo changes about one letter in three, and at most 3 */
    limit = wl < 3 ? 1 : wl / 3 < 3 ? (int)(wl / 3) : 3;
    if (limit < 1)
        limit = 1;
    dist = edit_distance(s->word, wl, cand, len);
    /* a prefix of a long option ("--check" for "--checkpoint-dir") is a guess too */
    if (dist > limit && !(wl >= 4 && len > wl && strncmp(cand, s->word, wl) == 0))
        return;
    if (dist > limit)
        dist = limit + 1; /* prefixes rank after real typos */
    if (s->best_distance < 0 || dist < s->best_distance) {
        s->best_distance = dist;
        memcpy(s->best, cand, len);
        s->best[len] = '\0';
    }
}

void ring_suggest_offer_words(ring_suggest_t *s, const char *list)
{
    for (const char *p = list; p != NULL && *p != '\0';) {
        size_t n = strcspn(p, "|");

        ring_suggest_offer(s, p, n);
        p += n;
        if (*p == '|')
            p++;
    }
}

const char *ring_suggest_best(const ring_suggest_t *s)
{
    return s->best_distance >= 0 ? s->best : NULL;
}
