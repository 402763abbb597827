"""nccl-tests' communicator split (`--split`, NCCL_TESTS_SPLIT, NCCL_TESTS_SPLIT_MASK).

Every rank computes a color from its rank; ranks of one color form a group with its own
communicator (created through our bootstrap under a color-scoped namespace, so every backend
splits the same way) and all groups run the same sweep at once. Rows are per group: the
group's ranks aggregated, busbw for the group's size.

Expressions, as nccl-tests' common.cu reads NCCL_TESTS_SPLIT: "AND n" or "&n" (rank & n),
"OR n" or "|n", "MOD n" or "%n", "DIV n" or "/n"; n in decimal, 0x hex, 0b binary or 0 octal.
NCCL_TESTS_SPLIT_MASK=<hex> means "AND 0x<hex>" and wins over NCCL_TESTS_SPLIT, as there.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from nccl_bench.core.errors import UsageError
from nccl_bench.records.bench import BenchRow

_OPS = {"and": lambda r, n: r & n, "&": lambda r, n: r & n, "or": lambda r, n: r | n, "|": lambda r, n: r | n,
        "mod": lambda r, n: r % n, "%": lambda r, n: r % n, "div": lambda r, n: r // n, "/": lambda r, n: r // n}
_EXPR = re.compile(r"\s*(and|or|mod|div|&|\||%|/)\s*(0x[0-9a-f]+|0b[01]+|0[0-7]*|[1-9][0-9]*)\s*", re.IGNORECASE)


def _number(text: str) -> int:
    t = text.lower()
    if t.startswith(("0x", "0b")):
        return int(t, 0)
    return int(t, 8) if t.startswith("0") else int(t)


def parse(expr: str, what: str = "--split") -> tuple[str, int]:
    """(operator, operand) of a split expression, or UsageError naming `what`."""
    m = _EXPR.fullmatch(expr)
    if not m:
        raise UsageError(f"{what}: '{expr}' is not a split expression (e.g. 'AND 0x1', 'MOD 2', 'DIV 4', "
                         "'%2', '/4', '&0x1', '|1')")
    op, n = m.group(1).lower(), _number(m.group(2))
    if op in ("mod", "%", "div", "/") and n == 0:
        raise UsageError(f"{what}: '{expr}' divides by zero")
    return op, n


def from_env(env=os.environ) -> str | None:
    """The split nccl-tests would apply from the environment, checked, as an expression; or None."""
    mask = env.get("NCCL_TESTS_SPLIT_MASK")
    if mask is not None:
        if not re.fullmatch(r"\s*(0x)?[0-9a-f]+\s*", mask, re.IGNORECASE):
            raise UsageError(f"NCCL_TESTS_SPLIT_MASK: '{mask}' is not a hexadecimal mask (e.g. 0x3)")
        return f"AND 0x{int(mask.strip(), 16):x}"
    expr = env.get("NCCL_TESTS_SPLIT")
    if expr is not None:
        parse(expr, "NCCL_TESTS_SPLIT")
    return expr


def color(expr: str | None, rank: int) -> int:
    if expr is None:
        return 0
    op, n = parse(expr)
    return _OPS[op](rank, n)


def groups(expr: str | None, nranks: int) -> dict[int, list[int]]:
    """color -> the world ranks of that group (in rank order: their group ranks), colors ascending."""
    out: dict[int, list[int]] = {}
    for r in range(nranks):
        out.setdefault(color(expr, r), []).append(r)
    return dict(sorted(out.items()))


@dataclass
class GroupJob:
    """A worker's view of its split group, shaped as cli.Job for the sweep: group rank and size, gathers
    among the group, and a namespace of its own for the communicator's ID exchange."""

    job: object  # cli.Job
    expr: str | None

    def __post_init__(self):
        everyone = groups(self.expr, self.job.nranks)
        self.color = color(self.expr, self.job.rank)
        self.members = everyone[self.color]
        self.group = list(everyone).index(self.color)
        self.ngroups = len(everyone)
        self.ident = self.job.ident
        split = self.expr is not None
        self.namespace = f"bench/split{self.color}" if split else "bench"
        self.store = self.job.store.group(f"split{self.color}", self.members) if split else self.job.store
        self.row_fields = {"group": self.group, "color": self.color} if split else {}

    @property
    def rank(self) -> int:
        return self.members.index(self.job.rank)

    @property
    def nranks(self) -> int:
        return len(self.members)

    def collect(self, rows: list[BenchRow]) -> list[BenchRow]:
        """Every group's rows, on every rank (each group's first rank contributes its group's)."""
        if self.expr is None:
            return rows
        mine = [r.to_json() for r in rows] if self.rank == 0 else []
        every = self.job.store.all_gather_obj("bench/split/rows", mine)
        return [BenchRow.from_json(r) for group_rows in every for r in group_rows]
