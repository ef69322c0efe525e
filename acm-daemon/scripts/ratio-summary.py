#!/usr/bin/env python3
"""Summarises per-round throughput ratios of two daemons (vs-reference.sh, ours-ab.sh).

Input: a file of lines "CLIENTS RATIO" or "CLIENTS RATIO SERIES", one per round; a
series names what the ratio compares (e.g. "ours(4)/C" beside "ours(8)/C", when one run
measures several daemons). Printed per series and client count: the median ratio, its 95 % confidence interval by a percentile bootstrap over the rounds
(10,000 resamples, fixed seed, so the same rounds always give the same interval), the
range, and in how many rounds the ratio was at least 1.

Why an interval: on a shared 2-core VM one round's ratio moves by 10 % or more with
the machine's state, and a median of ten rounds that is 1-2 % under 1 cannot say on its
own whether the two daemons differ. When the interval holds 1, the rounds do not tell
the two apart; when it lies under (or over) 1, they do.

usage: ratio-summary.py RATIOS_FILE [LABEL]   (LABEL names a ratio without a series,
       e.g. "ours/C")
"""
import random
import statistics
import sys

RESAMPLES = 10_000


def bootstrap_median(values, rng):
    """95 % percentile-bootstrap interval of the median of `values`."""
    n = len(values)
    medians = sorted(
        statistics.median(rng.choices(values, k=n)) for _ in range(RESAMPLES)
    )
    return medians[int(0.025 * RESAMPLES)], medians[int(0.975 * RESAMPLES) - 1]


def main():
    path = sys.argv[1]
    label = sys.argv[2] if len(sys.argv) > 2 else "ratio"
    # Series and client counts in the order they first appear.
    by = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            series = fields[2] if len(fields) > 2 else label
            by.setdefault(series, {}).setdefault(int(fields[0]), []).append(float(fields[1]))
    rng = random.Random(18)
    width = max(len(s) for s in by)
    print(
        f"{'':{width}}  clients  rounds  median  95% interval   (min-max)     rounds >= 1"
    )
    for series, counts in by.items():
        for n, q in counts.items():
            lo, hi = bootstrap_median(q, rng)
            print(
                "%-*s  %7d  %6d  %6.3f  %.3f-%.3f  (%.2f-%.2f)  %d"
                % (width, series, n, len(q), statistics.median(q), lo, hi,
                   min(q), max(q), sum(x >= 1 for x in q))
            )


if __name__ == "__main__":
    main()
