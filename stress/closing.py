"""How a stress run ends on rank 0: the final table, the lines that explain it, the journal's end
record and the summary file (written whole or not at all). Everything here reads the Ledger's
folded state, never the rounds themselves."""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from nccl_bench.comm.lifetime import destroy_note
from nccl_bench.core import sysinfo
from nccl_bench.records.stress_journal import summary_document
from nccl_bench.core.errors import UsageError
from stress import failpoint
from stress.ledger import Ledger
from stress.summary import render
from stress.options import duration_words

SHOWN_FAILURES = 20  # per mode; the journal has them all


def announce_lines(opts, nranks: int, journal_path, resume: bool, restart: int, done: int, todo: int,
                   ended: tuple[str, ...] = ()) -> list[str]:
    """What rank 0 says before the first round; `ended`: the modes whose --duration the journal says was up
    (their unrun rounds are not to go)."""
    o, j = opts, opts.job
    per_mode = f"{o.rounds} rounds per mode" + (f" for at most {duration_words(o.duration)} each" if o.duration else "")
    out = [f"stress: {j.backend} x{nranks}, init {','.join(j.init)}, {per_mode}, "
           f"skew-max {o.skew_max:g} s (seed {o.seed}), deadline {j.timeout:g} s, "
           f"verify {o.collective} {o.bytes} B, ranks-per-root {j.ranks_per_root}, scenario {o.scenario}"
           + (", check-ids" if o.check_ids else "")
           + (f", up to {o.destroys_in_flight} destroys behind each round" if o.destroys_in_flight
              else ", serial destroy")]
    again = f"restart {restart}: " if restart else ""
    up = f"; --duration was up for {', '.join(ended)}" if ended else ""
    out.append(f"journal: {journal_path}" + (f" ({again}resuming: {done} rounds done, {todo} to go{up})"
                                             if resume else ""))
    if o.inject:
        out.append("inject: " + ", ".join(map(str, o.inject)))
    return out


def start_line(starts: list[dict], backend: str) -> str:
    """Every rank's start in one line: the slowest and the fastest, or the first rank that could not start."""
    failed = [(r, s["error"]) for r, s in enumerate(starts) if s.get("error")]
    what = "CUDA's start and the first init" if backend != "gloo" else "the first init"
    if failed:
        r, e = failed[0]
        also = f" (and {len(failed) - 1} more rank(s))" if len(failed) > 1 else ""
        detail = f": {e['detail']}" if e.get("detail") else ""
        return (f"start: FAILED on rank {r}{also} ({e.get('host') or 'host unknown'}), {what} by a communicator "
                f"of its own after {starts[r]['seconds']:.2f} s: {e['kind']} in {e['op']}: {e['lib_error']}{detail}; "
                "no round ran")
    took = [s["seconds"] for s in starts]
    slow = max(range(len(took)), key=took.__getitem__)
    return (f"start: {what} paid once per rank, outside every round's deadline: {min(took):.2f}-{took[slow]:.2f} s "
            f"(slowest rank {slow})")


def report_lines(ledger: Ledger, opts, base: dict | None, shown: dict, restarts: list[dict],
                 findings: list[dict]) -> list[str]:
    """What rank 0 prints at the end, in order."""
    out = []
    hidden = sum(max(0, k - SHOWN_FAILURES) for k in shown.values())
    if hidden:
        out.append(f"... {hidden} more failures in the journal")
    table = ledger.tally.table()
    if len(table) > 1:
        out.append(f"comparison ({', '.join(t['mode'] for t in table)}: same seed, same skew schedule, "
                   "same deadline):")
    out.append(render(table))
    if base:
        out.append(baseline_line(base, table))
    note = destroy_note(opts.job.backend, ledger.tally.teardown_s)
    if note:
        out.append(note + (f"; here up to {opts.destroys_in_flight} ran behind the next rounds"
                           if opts.destroys_in_flight else ""))
    if opts.leak_every:
        out.append(ledger.leaks.summary_line(findings))
        out.extend(ledger.leaks.leak_lines(findings))
    if restarts:
        out.append(restart_line(restarts, ledger.repeated))
    return out


def baseline_line(base: dict, table: list[dict]) -> str:
    def f(v):
        return "-" if v is None else f"{v:.2f}/s"
    best = max((s["rounds_per_s"] or 0 for s in table), default=0)
    parts = [f"baseline ({base['cycles']} bare cycles): init+destroy {f(base['init_destroy_per_s'])}, "
             f"init+verify+destroy {f(base['init_verify_destroy_per_s'])}; stress {f(best)}"]
    for key in ("init_destroy_per_s", "init_verify_destroy_per_s"):
        if base.get(key):
            parts.append(f"{100 * best / base[key]:.0f}% of {key.replace('_per_s', '').replace('_', '+')}")
    errs = [base[k] for k in ("init_destroy_error", "init_verify_destroy_error") if base.get(k)]
    return ", ".join(parts) + ("" if not errs else f"; baseline errors: {'; '.join(errs)}")


def restart_line(restarts: list[dict], repeated: int) -> str:
    """How often the launcher restarted the worker group, and that no completed round was lost."""
    at = ", ".join(f"after {n['after_rounds']} rounds" for n in restarts)
    kept = "no completed round lost or repeated" if not repeated else "ROUNDS REPEATED"
    return f"restarts: {len(restarts)} (worker group restarted by the launcher {at}; resumed from the journal, {kept})"


def summary_path(journal_path: Path) -> Path:
    """`<journal>-summary.json` beside the journal; a taken name gets a number, never overwritten."""
    stem = journal_path.name[:-len(journal_path.suffix)] if journal_path.suffix else journal_path.name
    n = 0
    while (path := journal_path.with_name(f"{stem}-summary{f'-{n}' if n else ''}.json")).exists():
        n += 1
    return path


def write_summary(path: Path, ledger: Ledger, base: dict | None, identity: dict, journal_path: Path,
                  restarts: int = 0, findings: list[dict] | None = None) -> Path:
    """Flat rows (one per mode) plus one metadata block; `failures`, `rounds` and `leaks` on top."""
    meta = {**sysinfo.collect(identity["backend"]), "options": identity, "journal": str(journal_path),
            "baseline": base}
    doc = summary_document(ledger.tally.table(), meta, rounds=ledger.rounds, failures=ledger.tally.failures,
                           restarts=restarts, leaks=findings or [])
    # Whole or not at all: written beside, then linked in under its name (which never overwrites), so
    # a kill mid-write leaves no half summary for --resume to trip over.
    for debris in path.parent.glob(f".{path.name}.*.tmp"):  # cut by a kill (we hold the journal: no one else writes)
        debris.unlink(missing_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = json.dumps(doc, indent=1) + "\n"
    try:
        with open(tmp, "w") as f:
            if failpoint.armed("summary"):
                failpoint.write_then_die(f, text)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:  # a full disk: the summary is kept in the temporary folder, and said
        tmp.unlink(missing_ok=True)
        fallback = Path(tempfile.gettempdir()) / f"{path.stem}-{os.getpid()}{path.suffix}"
        with open(fallback, "x") as f:
            f.write(text)
        print(f"cannot write {path} ({e.strerror or e}); the summary is kept in {fallback}", file=sys.stderr,
              flush=True)
        return fallback
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise UsageError(f"{path} already exists; results are never overwritten") from None
    finally:
        os.unlink(tmp)
    return path


def restarts_left(restart: int) -> int:
    """How many more times the launcher (torchrun, our self-launch) will restart the group."""
    try:
        return max(0, int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0")) - restart)
    except ValueError:
        return 0
