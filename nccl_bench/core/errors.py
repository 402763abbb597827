"""Two tiers of errors, as in nccl4py.

UsageError: bad input caught before anything runs (exit 2, one line).
CommError: a library or deadline failure on a rank; carries rank, host, operation and
the library's own error name, and pickles so it can cross process boundaries.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad arguments, environment or files: the command cannot run (exit 2)."""


def at_least(option: str, value, floor, unit: str = "", most=None) -> None:
    """An option below its floor (or above `most`) is bad input that names it: '--rounds must be >= 1, got 0'."""
    if value < floor:
        raise UsageError(f"{option} must be >= {floor}{unit}, got {value}")
    if most is not None and value > most:
        raise UsageError(f"{option} must be <= {most}{unit}, got {value}")


def seconds(option: str, value: float, most: float = 7 * 86400.0) -> None:
    """A duration: above 0, finite, at most a week (inf or NaN would wait forever or never)."""
    if not 0 < value <= most:  # NaN fails this too
        raise UsageError(f"{option} must be above 0 and at most {most:g} seconds, got {value:g}")


class StoreUnreachable(UsageError):
    """The job store (master address) cannot be reached: the job cannot run (exit 2)."""


class StoreSilent(Exception):
    """The job store's address accepts connections and never answers (another service on that port): a peer
    that never came (exit 1)."""


class CommError(Exception):
    """A communicator operation failed on one rank."""

    kind = "error"  # verdict category: error | hang

    def __init__(self, op: str, lib_error: str, detail: str = "", rank: int = -1, host: str = ""):
        self.op = op
        self.lib_error = lib_error
        self.detail = detail
        self.rank = rank
        self.host = host
        super().__init__(str(self))

    def __reduce__(self):
        return (type(self), (self.op, self.lib_error, self.detail, self.rank, self.host))

    def __str__(self) -> str:
        where = f"rank {self.rank} ({self.host})" if self.rank >= 0 else "rank ?"
        tail = f": {self.detail}" if self.detail else ""
        return f"{where} {self.op}: {self.lib_error}{tail}"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "op": self.op, "lib_error": self.lib_error,
                "detail": self.detail, "rank": self.rank, "host": self.host}


class DeadlineExceeded(CommError):
    """An operation did not finish before its deadline: a hang, bounded."""

    kind = "hang"

    def __init__(self, op: str, lib_error: str = "deadline exceeded", detail: str = "",
                 rank: int = -1, host: str = ""):
        super().__init__(op, lib_error, detail, rank, host)


class BarrierTimeout(Exception):
    """Ranks that never arrived at a barrier within its timeout (names rank and host)."""

    def who(self) -> str:
        return ", ".join(f"rank {r} ({h or 'host unknown'})" for r, h in self.missing)

    def __init__(self, name: str, missing: list[tuple[int, str]], timeout: float):
        self.name = name
        self.missing = list(missing)
        self.timeout = timeout
        super().__init__(str(self))

    def __reduce__(self):
        return (type(self), (self.name, self.missing, self.timeout))

    def __str__(self) -> str:
        return f"barrier '{self.name}' timed out after {self.timeout:g}s; never arrived: {self.who()}"


class NeverJoined(BarrierTimeout):
    """Ranks that never joined the job at its start (nccl_bench.job.runner.meet)."""

    def __str__(self) -> str:
        return (f"{self.who()} never joined the job within {self.timeout:g}s: is it running, with this job's "
                "MASTER_ADDR, MASTER_PORT and WORLD_SIZE?")
