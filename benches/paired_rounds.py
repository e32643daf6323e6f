#!/usr/bin/env python3
"""Round-by-round ratios of telemetry_ab.sh runs, pooled over runs.

Each argument is FILE:TARGET[:BASE], a saved output of
benches/telemetry_ab.sh, the target to judge and the target it is divided
by (default `none`). Every round of a shape gives one ratio, TARGET's
requests a second over BASE's in the same round (the two ran one after
the other), so the machine's swings between rounds, often larger than
what is measured, cancel. Prints, per shape, each run's median ratio and
then every round of every run together: the median, a 95 % bootstrap
interval of the median, and the geometric mean.

  ROUNDS=16 benches/telemetry_ab.sh none=B:none spans=B:spans > run1.txt
  benches/paired_rounds.py run1.txt:spans run2.txt:held
"""

import collections
import random
import statistics
import sys

SHAPES = ("1x64", "16x4")


def rounds(path):
    """Requests a second of each target, by shape, in round order."""
    rps = collections.defaultdict(list)
    for line in open(path):
        fields = line.split()
        # A round: SHAPE NAME RPS and the CPU ticks (summary lines have a colon).
        if len(fields) > 3 and fields[0] in SHAPES and not fields[1].endswith(":"):
            rps[fields[0], fields[1]].append(float(fields[2]))
    return rps


def main(args):
    if not args:
        sys.exit(__doc__)
    pooled = collections.defaultdict(list)
    for arg in args:
        path, target, *base = arg.split(":")
        base = base[0] if base else "none"
        rps = rounds(path)
        for shape in SHAPES:
            ratios = [t / b for t, b in zip(rps[shape, target], rps[shape, base])]
            if ratios:
                pooled[shape] += ratios
                print(f"{path} {shape} {target}/{base}: {len(ratios)} rounds, median {statistics.median(ratios):.3f}")
    random.seed(0)
    for shape, ratios in pooled.items():
        medians = sorted(statistics.median(random.choices(ratios, k=len(ratios))) for _ in range(10000))
        print(
            f"{shape} all {len(ratios)} rounds: median {statistics.median(ratios):.3f}"
            f" (95 % interval {medians[250]:.3f}-{medians[9750]:.3f}),"
            f" geometric mean {statistics.geometric_mean(ratios):.3f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
