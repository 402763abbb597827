"""`report`: a markdown report with plots from result files, and run-to-run comparison.

    python -m nccl_bench report FILE... [--compare OTHER...] [--out DIR]

Reads bench, init (and init --simulate-ranks), stress (journal or summary), doctor,
accept and asv result files (nccl_bench.records), draws the figures (nccl_bench.report.plot),
compares with --compare's files kind by kind (nccl_bench.report.compare) and writes DIR/report.md
with the PNGs beside it (default results/runs/report-<time>/). Every input is read and checked
before anything is written: bad input is one line naming the file, exit 2.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from nccl_bench import records
from nccl_bench.report import compare
from nccl_bench.report.document import Report
from nccl_bench.job.cli import Parser, prog
from nccl_bench.core.errors import EXIT_FAILED, UsageError
from nccl_bench.core.results import RUNS, check_folder, check_out_folder, latest_run

def parser() -> Parser:
    p = Parser(prog=prog("report"), description="markdown report with plots from result files; "
               "--compare: ratio to other runs, with changes beyond the measured spread flagged")
    p.add_argument("files", nargs="*", metavar="FILE", help="result files: bench, init, stress journal or "
                   "summary, doctor, accept, asv results; or an asv results folder (results/asv/ or a machine's "
                   "folder in it): its history across commits (default: the latest run under results/runs/)")
    p.add_argument("--compare", nargs="+", default=[], metavar="OTHER",
                   help="result files of the run to compare with (ratios are FILE / OTHER)")
    p.add_argument("--out", default=None, help="folder for report.md and the PNGs (default "
                   "results/runs/report-<time>/; must be new or empty)")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when --compare flags a regression, or asv's step detection finds one in the "
                   "history (the report is written first), for CI")
    p.add_argument("--no-plots", action="store_true",
                   help="report.md without PNGs: the verdicts and tables alone, in a fraction of the time (a CI gate)")
    return p


@dataclass
class ReportOptions:
    files: list[str]
    compare: list[str] = field(default_factory=list)
    out: str | None = None
    fail_on_regression: bool = False
    plots: bool = True

    def __post_init__(self):
        if not self.files:
            raise UsageError("report: give at least one result FILE")
        if self.out is not None:
            check_out_folder(self.out)
        else:
            check_folder(RUNS, "the default folder for reports", make=True)


MAX_REGRESSION_LINES = 10  # the terminal names the most certain ones; report.md has them all
SAY_EVERY_S = 5.0  # a long report says where it stands this often


class Reading:
    """Called after each file read: every SAY_EVERY_S seconds of a long read, says how far it is."""

    def __init__(self):
        self.t0 = self.said = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.said >= SAY_EVERY_S and done < total:
            print(f"report: read {done:,} of {total:,} files ({now - self.t0:.0f} s)", flush=True)
            self.said = now

    def rounds(self, given: str, n: int) -> None:
        """Within one long stress journal (a day's soak is a million rounds, 45 s to read)."""
        now = time.monotonic()
        if now - self.said >= SAY_EVERY_S:
            print(f"report: {given}: read {n:,} rounds ({now - self.t0:.0f} s)", flush=True)
            self.said = now

    def done(self, total: int) -> None:
        took = time.monotonic() - self.t0
        if took >= SAY_EVERY_S:
            print(f"report: read {total:,} file{'' if total == 1 else 's'} in {took:.0f} s; writing the report",
                  flush=True)


def default_out() -> Path:
    base = RUNS / f"report-{time.strftime('%Y%m%d-%H%M%S')}"
    out, n = base, 1
    while out.exists():
        out, n = base.with_name(f"{base.name}-{n}"), n + 1
    return out


def ran(results) -> tuple[list, list]:
    """(results with rows, runs that ended before their first row: a bench that timed out, say). A folder of
    runs is reported whole; a failed one is said as failed, not a reason to refuse the others."""
    from nccl_bench.records.kinds import KINDS
    def empty(r) -> bool:
        return not r.rows and r.kind in KINDS and not KINDS[r.kind].empty_ok
    return [r for r in results if not empty(r)], [r for r in results if empty(r)]


def failed_words(res) -> str:
    err = res.meta.get("error")
    why = (f": {err.get('kind', 'error')} in {err.get('op', '?')}" if isinstance(err, dict) else
           f": {err}" if err else "")
    return f"a {res.kind} run that failed before its first row{why}"


def written(opts: ReportOptions, mine, others, out: Path):
    """The report built into `out`: (Report, path of report.md). Nothing half-written is left in a folder it
    made where that fails."""
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        report = Report(opts, mine, others, out)
        with warnings.catch_warnings(record=True) as said:  # matplotlib's and numpy's: the log's, not the terminal's
            warnings.simplefilter("always")
            text = report.build()
        path = out / "report.md"
        with open(path, "x") as f:
            f.write(text)
        if said:
            with open(out / "report.log", "w") as log:
                log.writelines(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in said)
        return report, path
    except (UsageError, OSError):
        if made:
            shutil.rmtree(out, ignore_errors=True)
        raise


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    if not a.files:
        latest = latest_run()
        if latest is None:
            raise UsageError(f"report: give a result FILE (there is no run under {RUNS} to default to)")
        print(f"report: reading the latest run, {latest}")
        a.files = [str(latest)]
    opts = ReportOptions(files=a.files, compare=a.compare, out=a.out, fail_on_regression=a.fail_on_regression,
                         plots=not a.no_plots)
    reading = Reading()
    mine = records.load_all(opts.files, need_rows=False, progress=reading, rounds=reading.rounds)  # all checked
    others = records.load_all(opts.compare, progress=reading, rounds=reading.rounds)  # before writing
    reading.done(len(mine) + len(others))
    mine, failed = ran(mine)
    for res in failed:
        print(f"report: {res.given}: {failed_words(res)}", flush=True)
    if not mine:
        print(f"report: every run given failed before its first row ({len(failed)}); nothing else to report",
              flush=True)
        return EXIT_FAILED
    if opts.fail_on_regression and not others and not any(r.kind == "asv" for r in mine):
        raise UsageError("--fail-on-regression needs --compare OTHER... or asv results (a history): there is "
                         "nothing to regress from")
    if others and (why := compare.in_common(mine, others)):
        raise UsageError(why)
    for line in (line for res in mine + others for line in res.reading()):
        print(f"report: {line}")
    out = Path(opts.out) if opts.out else default_out()
    try:
        report, path = written(opts, mine, others, out)
    except OSError as e:  # a full disk: the report is made again in the temporary folder, and said
        kept = Path(tempfile.mkdtemp(prefix="nccl-bench-report-"))
        report, path = written(opts, mine, others, kept)
        print(f"cannot write {out} ({e.strerror or e}); the report is kept in {kept}", file=sys.stderr, flush=True)
    if failed:  # said in the document too, after what the runs that finished show
        with open(path, "a") as f:
            f.write("\n## Runs that failed\n\n" + "".join(f"- `{r.given}`: {failed_words(r)}\n" for r in failed))
    print(f"report: {path} ({len(report.images)} plot(s))")
    if others:
        print(f"comparison: {report.flagged['regression']} regression(s), {report.flagged['improvement']} "
              "improvement(s) beyond the measured spread")
    regressed = report.flagged["regression"]
    if report.history is not None:
        shown = report.history.regressions[:MAX_REGRESSION_LINES]
        for r in shown:
            noise = f"its runs' spread {r.spread:.1%}" if r.spread is not None else "two commits, intervals apart"
            print(f"regression: {r.benchmark} [{r.params or '-'}] on {r.machine}: {r.change:+.1%} between "
                  f"{r.last_good.short} and {r.first_bad.short} ({r.before:.4g} -> {r.after:.4g}; {noise})")
        if len(report.history.regressions) > len(shown):
            print(f"regression: {len(report.history.regressions) - len(shown)} more in {path}")
        if report.history.noisy:
            print(f"history: {len(report.history.noisy)} series too noisy to judge, not named (listed in {path})")
        print(f"history: {sum(map(len, report.history.commits.values()))} commit(s), "
              f"{len(report.history.series)} series, {len(report.history.regressions)} regression(s)")
        regressed += len(report.history.regressions)
    sys.stdout.flush()
    return EXIT_FAILED if opts.fail_on_regression and regressed else 0
