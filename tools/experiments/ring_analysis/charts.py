"""matplotlib with the Agg backend (PNG files, no display), and what the
plots share: a figure of one size, grouped bars that label every bar, and
saving with the title and the legend's entries in the PNG's text chunks
(Title, Description), so a test or a reader can check what a plot shows
without looking at it."""

import math
import sys
import textwrap

_plt = None


def pyplot():
    """matplotlib.pyplot on the Agg backend (imported on first use: it takes
    most of a second, and the subcommands without plots do not need it)."""
    global _plt
    if _plt is None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        _plt = plt
    return _plt


def draw_all(draw):
    """draw() makes a report's PNGs and returns their names. A plot that fails
    must not lose the tables written before it: it says why on stderr.
    Returns (names, 0), or ([], 1) after a failure."""
    try:
        return draw(), 0
    except Exception as e:  # matplotlib's errors have no common base
        print("ring-analyze: drawing the plots failed: %s: %s" % (type(e).__name__, e),
              file=sys.stderr)
        return [], 1


def figure():
    fig, ax = pyplot().subplots(figsize=(9, 5.6), dpi=100)
    ax.grid(True, alpha=0.35)
    return fig, ax


def save(fig, path, title):
    """Writes fig to path as PNG with title on top; the legend's entries go
    into the Description chunk as 'series: A; B; ...'."""
    ax = fig.axes[0]
    ax.set_title(textwrap.fill(title, 100), fontsize=10)
    labels = [t for t in ax.get_legend_handles_labels()[1] if not t.startswith("_")]
    if labels:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    fig.tight_layout()
    fig.savefig(path, format="png",
                metadata={"Title": title, "Description": "series: " + "; ".join(labels),
                          "Software": "ringd ring-analyze"})
    pyplot().close(fig)


def grouped_bars(ax, groups, series, value, fmt, label_zero=True, spread=None, group_label=str):
    """Bars for every (group, series) with value(group, series) not None,
    clustered by group, a colour per series. A group with no value at all is
    left out (no empty, unlabelled cluster); every bar drawn is labelled with
    fmt(value), so a bar of 0 still shows as '0' above its place (unless not
    label_zero: a histogram's empty bins are no news). spread(group, series),
    when given, is (lo, hi) or None: an error bar from lo to hi (a bar over
    repeats: the median, and the range of the repeats), the label above it.
    group_label(group) is the group's name under its cluster. Returns the
    groups left out."""
    kept = [g for g in groups if any(value(g, s) is not None for s in series)]
    width = 0.8 / max(len(series), 1)
    tops = [value(g, s) for g in kept for s in series if value(g, s) is not None]
    if spread is not None:
        tops += [spread(g, s)[1] for g in kept for s in series if spread(g, s) is not None]
    top = max(tops + [0])
    for j, s in enumerate(series):
        xs, ys, errs = [], [], []
        for i, g in enumerate(kept):
            v = value(g, s)
            if v is not None:
                xs.append(i - 0.4 + width * (j + 0.5))
                ys.append(v)
                errs.append(spread(g, s) if spread is not None else None)
        bars = ax.bar(xs, ys, width * 0.92, label=str(s), edgecolor="black", linewidth=0.5)
        with_err = [(x, y, e) for x, y, e in zip(xs, ys, errs) if e is not None]
        if with_err:
            ax.errorbar([x for x, _, _ in with_err], [y for _, y, _ in with_err],
                        yerr=[[y - e[0] for _, y, e in with_err],
                              [e[1] - y for _, y, e in with_err]],
                        fmt="none", ecolor="black", elinewidth=1, capsize=3, label="_range")
        for b, v, e in zip(bars, ys, errs):
            if v == 0 and not label_zero:
                continue
            y = max(b.get_height(), e[1]) if e else b.get_height()
            ax.annotate(fmt(v), (b.get_x() + b.get_width() / 2, y),
                        xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                        fontsize=7)
    ax.set_xticks(range(len(kept)))
    ax.set_xticklabels([group_label(g) for g in kept])
    ax.set_ylim(0, top * 1.12 if top > 0 else 1)
    ax.grid(False)
    ax.grid(True, axis="y", alpha=0.35)
    return [g for g in groups if g not in kept]


def finite(v):
    return v is not None and isinstance(v, float) and math.isfinite(v)
