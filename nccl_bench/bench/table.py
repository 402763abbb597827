"""bench's text output, laid out as nccl-tests prints it: the table per collective, the footer,
and -M's memory line. Rows are the sweep's (nccl_bench.measure.sweep); nothing here measures."""
from __future__ import annotations

from nccl_bench.core.startmarks import mark
from nccl_bench.core.stats import UNSTABLE_PCT
from nccl_bench.measure import tail
from nccl_bench.records.bench import BenchRow, below_min_bw, totals

_PLACE = ["time", "algbw", "busbw", "#wrong"]
# -I: nccl-tests' extra columns per placement, then ours: iterations above 2 x p50
_PER_ITER = ["i_min", "i_max", "i_p99", "i_cv%", "i_>2x"]
# Fixed widths, as nccl-tests' printf: a row can be printed the moment it is measured, under a header printed
# before it (a wider value pushes its row, never the others)
_WIDTH = {"size": 12, "count": 12, "type": 8, "redop": 6, "root": 6, "time": 9, "algbw": 7, "busbw": 7,
          "#wrong": 6, "i_min": 8, "i_max": 8, "i_p99": 8, "i_cv%": 6, "i_>2x": 9, "timestamp": 19, "spread": 15}


def columns(per_iter: bool, stamped: bool, spread: bool) -> list[str]:
    return ["size", "count", "type", "redop", "root", *(_PLACE + (_PER_ITER if per_iter else [])) * 2,
            *(["timestamp"] if stamped else []), *(["spread"] if spread else [])]


def _join(cells: list, cols: list[str]) -> str:
    return "  ".join(str(c).rjust(_WIDTH[h]) for c, h in zip(cells, cols))


def header(title: str, cols: list[str], cpu: bool) -> str:
    """The lines above the rows: the title, the units, the column names."""
    per_iter = "i_min" in cols
    time_is = "time (us, host time per launch: -C)" if cpu else "time (us)"
    units = (f"(B)  (elements)  |  out-of-place: {time_is} algbw busbw (GB/s) #wrong"
             + (" i_min i_max i_p99 (us) i_cv% i_>2x (iterations above 2 x p50: h the host's, its launch late; "
                "d the device's)" if per_iter else "")
             + "  |  in-place: the same")
    names = _join(cols, cols)
    return "\n".join([f"# {title}", f"# {units}", "#" + names[1:]])


def line(r: BenchRow, cols: list[str]) -> str:
    """One row, in `cols`' columns."""
    per_iter = "i_min" in cols

    def place(p: str) -> list:
        m = r.place(p)
        cells = [f"{m.time:.2f}", f"{m.alg_bw:.2f}", f"{m.bus_bw:.2f}", "N/A" if m.nwrong is None else m.nwrong]
        if per_iter:
            i = r.per_iter(p)
            cells += [f"{i['min_us']:.2f}", f"{i['max_us']:.2f}", f"{i['p99_us']:.2f}", f"{i['cv_pct']:.1f}",
                      tail.cell(i)]
        return cells
    cells = [r.size, r.count, r.type, r.redop, r.root, *place("out_of_place"), *place("in_place"),
             *([r.timestamp] if "timestamp" in cols else []), *([_stability(r)] if "spread" in cols else [])]
    return _join(cells, cols)


def notes(rows: list[BenchRow]) -> list[str]:
    """What the rows cannot say in a cell: an in-place placement timed but not checked."""
    return [f"# in-place {r.collective}: timed, not checked (point-to-point in place has no defined "
            "order across processes)" for r in rows[:1] if r.in_place.nwrong is None
            and r.out_of_place.nwrong is not None]


def table(rows: list[BenchRow], title: str) -> str:
    """nccl-tests' columns: size count type redop root | out-of-place | in-place [| timestamp] [| spread]."""
    cols = columns(bool(rows) and rows[0].out_of_place_per_iter is not None,
                   bool(rows) and rows[0].timestamp is not None, any(r.spread_pct is not None for r in rows))
    cpu = bool(rows) and rows[0].out_of_place.cpu_time
    return "\n".join([header(title, cols, cpu), *(line(r, cols) for r in rows), *notes(rows)])


class Streamed:
    """A table printed as its rows are measured (rank 0): the header before a cycle's first row, each row at
    once, the notes at the end; what table() prints at once, line for line."""

    def __init__(self, title: str, cycles: int, per_iter: bool, stamped: bool, cpu: bool):
        self.title, self.cycles, self.cpu = title, cycles, cpu
        self.cols = columns(per_iter, stamped, cycles > 1)
        self.cycle, self.rows = None, []

    def row(self, r: BenchRow) -> None:
        if r.cycle != self.cycle:
            self.cycle = r.cycle
            of = f"  cycle {r.cycle + 1}/{self.cycles}" if self.cycles > 1 else ""
            print(header(self.title + of, self.cols, self.cpu), flush=True)
        self.rows.append(r)
        print(line(r, self.cols), flush=True)
        if len(self.rows) == 1:
            mark("row")

    def close(self) -> None:
        for note in notes(self.rows):
            print(note, flush=True)


def _stability(row: BenchRow) -> str:
    """-N: the larger spread of the point's cycles; UNSTABLE past stats.UNSTABLE_PCT (as pyperf warns)."""
    worst = max((v for v in (row.spread_pct or {}).values() if v is not None), default=None)
    if worst is None:
        return "-"
    return f"{worst:.1f}%" + (" UNSTABLE" if row.unstable else "")


def footer(rows: list[BenchRow], min_bw: float | None = None) -> str:
    """nccl-tests' closing lines: wrong values over the run and the average busbw (OK or FAILED against
    NCCL_TESTS_MIN_BW where given)."""
    wrong, avg = totals(rows)
    unstable = len({r.size for r in rows if r.unstable})
    below = below_min_bw(rows, min_bw)
    return (f"# Out of bounds values : {wrong} {'OK' if not wrong else 'FAILED'}\n"
            f"# Avg bus bandwidth    : {avg:.4g}" + ("" if below is None else " FAILED" if below else " OK")
            + (f"\n# Unstable points      : {unstable} (their -N cycles differ by more than {UNSTABLE_PCT:g} %; "
               "a comparison calls differences within the spread noise)" if unstable else ""))


def memory_line(per_rank: list[dict]) -> str:
    """nccl-tests' -M line: the rank that used the most."""
    gib = lambda b: f"{b / 2**30:.2f} GiB"  # noqa: E731
    rss = max(range(len(per_rank)), key=lambda r: per_rank[r]["host_peak_rss_bytes"])
    host = f"host peak RSS {gib(per_rank[rss]['host_peak_rss_bytes'])} (rank {rss})"
    if "device_used_bytes" not in per_rank[0]:
        return f"# GPU memory usage : N/A (gloo runs on the CPU); {host}"
    top = max(range(len(per_rank)), key=lambda r: per_rank[r]["device_used_bytes"])
    m = per_rank[top]
    return (f"# GPU memory usage : {gib(m['device_used_bytes'])} of {gib(m['device_total_bytes'])} used on the "
            f"device (rank {top}; NCCL's buffers included), torch peak {gib(m['torch_peak_bytes'])}; {host}")
