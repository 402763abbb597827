"""The seeded skew schedule: the same seed gives the same sleeps on every rank, every run.

A rank's skew in a round depends only on (seed, round, rank), not on the init mode, so
`--init all` gives every mode the same schedule, and a resumed run the same sleeps as an
uninterrupted one.
"""
from __future__ import annotations

import random


def skew(seed: int, round_: int, rank: int, skew_max: float) -> float:
    """Seconds this rank sleeps before its init in this round."""
    if skew_max <= 0:
        return 0.0
    return random.Random(f"stress:{seed}:{round_}:{rank}").uniform(0.0, skew_max)


def table(seed: int, rounds: int, nranks: int, skew_max: float) -> list[list[float]]:
    return [[skew(seed, r, k, skew_max) for k in range(nranks)] for r in range(rounds)]


def render(seed: int, rounds: int, nranks: int, skew_max: float) -> str:
    """The schedule as text: one line per round, skew in ms per rank, and the slowest rank."""
    head = f"# skew schedule: seed {seed}, {nranks} ranks, skew-max {skew_max:g} s (ms per rank)"
    cols = "round " + " ".join(f"{'r' + str(k):>8}" for k in range(nranks)) + "  slowest"
    lines = [head, cols]
    for r, row in enumerate(table(seed, rounds, nranks, skew_max)):
        slowest = max(range(nranks), key=row.__getitem__) if skew_max > 0 else "-"
        lines.append(f"{r:5d} " + " ".join(f"{s * 1e3:8.1f}" for s in row) + f"  r{slowest}")
    return "\n".join(lines)
