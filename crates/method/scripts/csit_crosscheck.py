#!/usr/bin/env python3
"""Cross-check: FD.io CSIT's MLRsearch controller on linerate's simulated DUTs.

Runs CSIT's reference implementation (resources/libraries/python/MLRsearch
of a CSIT checkout, standard library only) against a Python copy of the
simulated DUTs of crates/method/src/sim.rs (same frame arithmetic, same
SplitMix64 draw per trial number for the rare losses) with the goals of
crates/method/src/mlrsearch/tests.rs, and prints the trial counts and
bounds, to compare with

    cargo test -p linerate-method trial_counts -- --ignored --nocapture

Usage: csit_crosscheck.py CSIT_CHECKOUT/resources/libraries/python
"""

import math
import statistics
import sys

sys.path.insert(0, sys.argv[1])

from MLRsearch.config import Config  # noqa: E402
from MLRsearch.multiple_loss_ratio_search import MultipleLossRatioSearch  # noqa: E402
from MLRsearch.search_goal import SearchGoal  # noqa: E402
from MLRsearch.search_goal_tuple import SearchGoalTuple  # noqa: E402
from MLRsearch.trial_measurement import AbstractMeasurer  # noqa: E402
from MLRsearch.trial_measurement.measurement_result import MeasurementResult  # noqa: E402

LINE = 14880952.38095238
M64 = (1 << 64) - 1


def uniform(seed, n):
    """sim.rs's SplitMix64 draw for trial number n."""
    z = (seed + 0x9E3779B97F4A7C15 * (n + 1)) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    z ^= z >> 31
    return (z >> 11) / float(1 << 53)


class Dut(AbstractMeasurer):
    """sim.rs's SimulatedDut: capacity, bucket, overload share, losses."""

    def __init__(self, cap, buf=0, overload=1.0, rare=None, loss_above=None):
        self.cap, self.buf, self.overload = cap, buf, overload
        self.rare, self.loss_above = rare, loss_above
        self.log = []

    def measure(self, intended_duration, intended_load):
        d = intended_duration
        intended = round(intended_load * d)
        capacity = math.floor(self.cap * d) + self.buf
        fwd = intended if intended <= capacity else math.floor(capacity * self.overload)
        if self.loss_above and intended / d > self.loss_above[0]:
            fwd -= fwd // self.loss_above[1]
        if self.rare and uniform(self.rare[2], len(self.log)) < self.rare[0]:
            fwd = max(0, fwd - self.rare[1])
        self.log.append((round(intended_load), intended - fwd))
        return MeasurementResult(
            intended_duration=d,
            intended_load=intended_load,
            offered_count=intended,
            forwarded_count=fwd,
        )


def goal(loss, exceed, dursum):
    # CSIT needs a preceding target when the duration sum is longer than
    # the initial trial: its one preceding target has a 1 s duration sum.
    return SearchGoal(
        loss_ratio=loss,
        exceed_ratio=exceed,
        relative_width=0.01,
        initial_trial_duration=1.0,
        final_trial_duration=1.0,
        duration_sum=dursum,
        preceding_targets=0 if dursum <= 1.0 else 1,
        fail_fast=False,
    )


GOALS = {
    "NDR": goal(0.0, 0.0, 1.0),
    "PDR": goal(0.005, 0.0, 1.0),
    "NDR50": goal(0.0, 0.5, 4.0),
    "PDR50": goal(0.005, 0.5, 4.0),
}
SETS = [["NDR"], ["PDR"], ["NDR50"], ["PDR50"], ["NDR", "PDR"],
        ["NDR50", "PDR50"], ["NDR", "PDR", "NDR50", "PDR50"]]


def run(dut, names):
    cfg = Config(
        goals=SearchGoalTuple(tuple(GOALS[n] for n in names)),
        min_load=LINE / 10000,
        max_load=LINE,
        search_duration_max=1e9,
    )
    res = MultipleLossRatioSearch(config=cfg).search(measurer=dut, debug=lambda m: None)
    bounds = {
        n: (round(float(r.relevant_lower_bound or 0)), round(float(r.relevant_upper_bound or 0)))
        for n, r in zip(names, res.values())
    }
    return len(dut.log), bounds


DUTS = {
    "policer 30 kpps": lambda: Dut(30000),
    "policer 30 kpps, 1000-packet bucket": lambda: Dut(30000, buf=1000),
    "collapsing": lambda: Dut(1e6, overload=0.5),
    "lossy above 800k": lambda: Dut(1e6, loss_above=(800000, 333)),
}
for name, make in DUTS.items():
    for s in SETS:
        n, b = run(make(), s)
        print(f"{name}, {'+'.join(s)}: {n} trials, {b}")
for s in SETS:
    counts = sorted(run(Dut(1e6, rare=(0.1, 3, seed)), s)[0] for seed in range(200))
    print(f"rare losses, {'+'.join(s)}: over 200 seeds mean {statistics.mean(counts):.1f}"
          f" median {counts[100]} p90 {counts[180]} max {counts[-1]}")
