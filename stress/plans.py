"""What one round does on one rank, from the options alone: every rank derives the same plan, so
they agree on skews and injected faults without talking."""
from __future__ import annotations

from stress import inject, schedule
from stress.options import StressOptions
from stress.round import RoundPlan


def mode_of(opts: StressOptions):
    """seq -> its init mode, None past the plan: the modes in turn, --rounds each (computed, never held)."""
    modes, rounds = list(opts.job.init), opts.rounds
    return lambda seq: modes[seq // rounds] if 0 <= seq < rounds * len(modes) else None


def seq_of(opts: StressOptions):
    """(mode, round) -> its seq in this plan, -1 where the plan has no such round: mode_of's inverse, for a journal's
    rounds, whose seqs were their own run's (a --resume may raise --rounds, which moves every mode after the first)."""
    index, rounds = {m: i for i, m in enumerate(opts.job.init)}, opts.rounds
    return lambda mode, r: index[mode] * rounds + r if mode in index and 0 <= r < rounds else -1


def skews(opts: StressOptions, nranks: int, r: int) -> list[float]:
    """Every rank's sleep before its init in round `r`: the seeded schedule plus injected delays."""
    extra = {i.rank: i.seconds for i in opts.inject if i.kind == "delay" and i.round == r}
    for i in opts.inject:
        if i.kind == "slow-rank" and i.round == r:
            extra[i.rank] = extra.get(i.rank, 0.0) + opts.job.timeout + inject.SLOW_EXTRA_S
    return [schedule.skew(opts.seed, r, k, opts.skew_max) + extra.get(k, 0.0) for k in range(nranks)]


def faults(opts: StressOptions, rank: int, mode: str, r: int, restart: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The injected kinds on this rank in this round, and the roots stale-key holds back."""
    mine = [i.kind for i in opts.inject if i.round == r and i.rank == rank
            and i.kind not in inject.LEGACY and i.kind != "leak"]
    if "crash" in mine or "crash-collective" in mine:
        if restart:  # a crash fires once: never again in the group the launcher restarted
            mine = [k for k in mine if not k.startswith("crash")]
    held = tuple(sorted({i.rank for i in opts.inject if i.kind == "stale-key" and i.round == r
                         and mode == "stock"}))
    return tuple(mine), held


def round_plan(opts: StressOptions, rank: int, seq: int, mode: str, r: int, skew: list[float], restart: int,
               group) -> RoundPlan:
    wrong = any(i.kind == "wrong" and i.round == r and i.rank == rank for i in opts.inject)
    mine, held = faults(opts, rank, mode, r, restart)
    return RoundPlan(seq, mode, r, skew[rank], opts.job.timeout, opts.check_ids, wrong, mine, held, group)
