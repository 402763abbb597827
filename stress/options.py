"""What a stress run does; bad values fail early with the option's name (exit 2)."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from nccl_bench.comm import gpu_count
from nccl_bench.core.errors import UsageError, at_least
from nccl_bench.job.options import JobOptions
from nccl_bench.comm.scenario import check_scenario
from stress.inject import Injection

ON_FAILURE = ("continue", "stop")
# --collective: the verification collectives, named here without torch (nccl_bench.measure.collectives holds them)
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv")
# Options that must match for --resume to continue a journal (the rest may change).
RESUME_KEYS = ("backend", "nranks", "init", "ranks_per_root", "skew_max", "seed", "timeout",
               "collective", "bytes", "check_ids", "inject", "scenario")


# An NCCL destroy waits out its proxy threads' poll, so K destroys in flight cap a run's rounds per second:
# 8 nearly doubles 4 and matches a plain nccl4py loop, where 16 holds twice the communicators (GPU memory,
# NCCL threads) for a third more (docs/validation.md).
DESTROYS_IN_FLIGHT = 8
MAX_ROUNDS = 100_000_000  # per mode: a month of rounds at 30 a second; the run holds one byte a round
MAX_DURATION_S = 366 * 86400  # --duration: a year per mode
# --duration without --rounds: rounds enough for 100 a second of it, above any rate measured (docs/validation.md),
# bounded as --rounds is; the mode ends at whichever comes first
ROUNDS_PER_S_BOUND = 100
UNITS_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, what: str = "--duration") -> float:
    """'90', '90s', '30m', '72h', '3d' -> seconds (one line naming the option where it is none of these)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text.lower())
    if not m:
        raise UsageError(f"{what} must be a time such as 90, 30m, 72h or 3d, got '{text}'")
    return float(m.group(1)) * UNITS_S[m.group(2)]


def duration_words(seconds: float) -> str:
    """72h, 30m, 90s: the largest unit that divides it, as the user would write it."""
    for unit in ("d", "h", "m"):
        if seconds >= UNITS_S[unit] and seconds % UNITS_S[unit] == 0:
            return f"{seconds / UNITS_S[unit]:g}{unit}"
    return f"{seconds:g}s"


def default_timeout(backend: str) -> float:
    """A few times a healthy round (most of which is the destroy: docs/validation.md)."""
    return 2.0 if backend == "gloo" else 3.0


@dataclass
class StressOptions:
    """One stress run. `job` holds backend, ranks, init modes, roots and the per-round deadline."""

    job: JobOptions
    rounds: int = 100  # per init mode
    duration: float | None = None  # seconds per init mode, --duration: the mode ends after the round in flight
    skew_max: float = 0.05  # seconds; each rank sleeps uniform(0, skew_max) before each init
    seed: int = 0
    collective: str = "all_reduce"
    bytes: int = 4096  # of the largest buffer of the verification collective
    on_failure: str = "continue"
    journal: str | None = None
    summary_json: str | None = None  # default: <journal>-summary.json beside the journal
    resume: bool = False
    check_ids: bool = False
    baseline: int = 0  # bare init+destroy cycles measured before the rounds (0: none)
    inject: list[Injection] = field(default_factory=list)  # resolved by stress.inject.resolve
    max_restarts: int = 0  # self-launch: worker-group restarts (torchrun's --max-restarts)
    # teardowns that may still run behind a round (0: each round destroys before the next starts);
    # None: DESTROYS_IN_FLIGHT, or 0 on torch
    destroys_in_flight: int | None = None
    scenario: str = "restart"  # restart | same-group (nccl_bench.comm.scenario)
    leak_every: int = 100  # rounds between resource samples on every rank (0: no leak watch)
    leak_warmup: int | None = None  # rounds whose samples are left out; None: a fifth of the run, <= 1,000
    fail_on_leak: bool = False  # a LEAK verdict makes the run exit 1

    def __post_init__(self):
        at_least("--rounds", self.rounds, 1, most=MAX_ROUNDS)
        if self.duration is not None and not 1 <= self.duration <= MAX_DURATION_S:
            raise UsageError(f"--duration must be 1 s to 366 days per mode, got {self.duration:g} s")
        if not 0 <= self.skew_max <= 3600:
            raise UsageError(f"--skew-max must be 0 to 3600 seconds, got {self.skew_max:g}")
        if self.collective not in COLLECTIVES:
            raise UsageError(f"unknown --collective '{self.collective}' (choose from {', '.join(COLLECTIVES)})")
        at_least("--bytes", self.bytes, 4, " (one float32)")
        if self.on_failure not in ON_FAILURE:
            raise UsageError(f"unknown --on-failure '{self.on_failure}' (choose from {', '.join(ON_FAILURE)})")
        if self.resume and not self.journal:
            raise UsageError("--resume needs --journal PATH (the journal to continue)")
        if self.check_ids and self.job.backend == "torch":
            raise UsageError("--check-ids needs a backend whose IDs this tool exchanges (nccl, gloo); "
                             "the torch backend exchanges them inside PyTorch")
        check_scenario(self.scenario)
        if self.scenario == "same-group" and self.job.backend == "torch" and gpu_count() < 2:
            raise UsageError("--scenario same-group on the torch backend makes each round's communicator on "
                             f"another GPU (as pytorch#178473's repro does); this machine has {gpu_count()}")
        at_least("--max-restarts", self.max_restarts, 0)
        at_least("--baseline", self.baseline, 0, " cycles")
        at_least("--leak-every", self.leak_every, 0, " rounds (0: no leak watch)")
        if self.leak_warmup is not None and self.leak_warmup < 0:
            raise UsageError(f"--leak-warmup must be >= 0 rounds, got {self.leak_warmup}")
        if self.fail_on_leak and not self.leak_every:
            raise UsageError("--fail-on-leak needs the leak watch: --leak-every N with N >= 1")
        if self.destroys_in_flight is None:
            self.destroys_in_flight = 0 if self.job.backend == "torch" else DESTROYS_IN_FLIGHT
        at_least("--destroys-in-flight", self.destroys_in_flight, 0)
        if self.destroys_in_flight and self.job.backend == "torch":
            # destroy_process_group() tears down the default group, which the next
            # init_process_group() replaces: the two cannot overlap
            raise UsageError("--destroys-in-flight needs 0 on the torch backend: PyTorch destroys its default "
                             "process group, which the next round's init_process_group replaces")

    def identity(self, nranks: int) -> dict:
        """What a journal records and --resume compares."""
        job = self.job
        return {"backend": job.backend, "nranks": nranks, "init": list(job.init),
                "ranks_per_root": job.ranks_per_root, "skew_max": self.skew_max, "seed": self.seed,
                "timeout": job.timeout, "collective": self.collective, "bytes": self.bytes,
                "check_ids": self.check_ids, "inject": [str(i) for i in self.inject], "scenario": self.scenario,
                "rounds": self.rounds, "duration_s": self.duration, "on_failure": self.on_failure,
                "destroys_in_flight": self.destroys_in_flight, "leak_every": self.leak_every}

    def as_dict(self) -> dict:
        d = asdict(self)
        d["inject"] = [str(i) for i in self.inject]
        return d
