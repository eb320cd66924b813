"""Repeats of one experiment cell (ring-exp --repeats R): the median of a
figure over the repeats and its spread, the range min..max (with 3 to 5
repeats an interquartile range says little more than the range, and the
range hides nothing). Time to a target accuracy is censored: a repeat that
never reached it counts as later than every repeat that did, so the median
is a true median of the R repeats (never, when the middle repeat never got
there), not a median of the lucky ones. Pure: no I/O, the standard library
only, so the checks can feed it numbers directly."""

import collections

NEVER = float("inf")

# median, lo, hi: the figure (NEVER: not reached); count: the values it is
# of; reached: how many of them are finite (time to target; else == count)
Spread = collections.namedtuple("Spread", "median lo hi count reached")


def median(values):
    """The median of a non-empty sequence of numbers (the mean of the middle
    two for an even count); NEVER sorts after every number, so a middle
    value of NEVER makes the median NEVER. ValueError when empty."""
    v = sorted(values)
    if not v:
        raise ValueError("the median of nothing")
    mid = len(v) // 2
    if len(v) % 2:
        return v[mid]
    return (v[mid - 1] + v[mid]) / 2  # NEVER in the middle: NEVER


def spread(values):
    """Spread over the numbers among values (None: no figure, left out), or
    None when there is none."""
    v = [x for x in values if x is not None]
    if not v:
        return None
    return Spread(median(v), min(v), max(v), len(v), sum(1 for x in v if x != NEVER))


def time_spread(times):
    """Spread of times to target over the repeats that ran, None in times
    meaning never reached (not 'unknown'); None when times is empty."""
    if not times:
        return None
    return spread([NEVER if t is None else t for t in times])


def curve_median(curves):
    """The median of several repeats' curves, each [(key, x, y)] with key
    the step: at every key all curves have, (median x, median y); when
    fewer than 2 keys are common to all (evaluations by time, not by step),
    by position up to the shortest curve instead. Returns [(x, y)]."""
    curves = [c for c in curves if c]
    if not curves:
        return []
    common = set(k for k, _, _ in curves[0])
    for c in curves[1:]:
        common &= set(k for k, _, _ in c)
    points = [[(x, y) for k, x, y in c if k in common] for c in curves]
    if len(common) < 2 or any(len(p) != len(common) for p in points):
        # by position (a key twice in one curve would misalign the columns)
        points = [[(x, y) for _, x, y in c] for c in curves]
    n = min(len(p) for p in points)
    return [(median([p[i][0] for p in points]), median([p[i][1] for p in points]))
            for i in range(n)]


def median_curve_crossing(curves, target):
    """The first time at which the median over the repeats of their accuracy
    reaches target, a repeat's accuracy at a time being its last evaluation
    at or before it (none yet: below any target); None when it never does or
    there are no curves. curves: [[(time, accuracy)], ...]. Steadier than the
    median of first crossings where the target lies on a plateau: there one
    evaluation's noise moves a repeat's first crossing by seconds."""
    curves = [sorted(c) for c in curves if c]
    at = [0] * len(curves)
    now = [float("-inf")] * len(curves)
    for t in sorted(set(t for c in curves for t, _ in c)):
        for i, c in enumerate(curves):
            while at[i] < len(c) and c[at[i]][0] <= t:
                now[i] = c[at[i]][1]
                at[i] += 1
        if median(now) >= target:
            return t
    return None


def _num(v, fmt):
    return "never" if v == NEVER else fmt % v


def spread_text(sp, fmt, suffix=""):
    """'MEDIAN [LO..HI]' in fmt (suffix after the median, e.g. 's');
    '-' for None. Time to target adds '(K/N)' when only K of the N
    repeats reached it ('never (0/3)' when none did)."""
    if sp is None:
        return "-"
    if sp.reached == 0:
        return "never (0/%d)" % sp.count
    med = _num(sp.median, fmt) + ("" if sp.median == NEVER else suffix)
    text = "%s [%s..%s]" % (med, fmt % sp.lo, _num(sp.hi, fmt))
    if sp.reached < sp.count:
        text += " (%d/%d)" % (sp.reached, sp.count)
    return text
