"""The report document: one section per result kind (every kind nccl_bench.records reads), figures
beside it, and the run-to-run comparison when there are files to compare with."""
from __future__ import annotations

import os
import time
from pathlib import Path

from tabulate import tabulate

from nccl_bench.core.errors import UsageError
from nccl_bench.core.sysinfo import git_sha
from nccl_bench.records.kinds import KINDS

KIND_ORDER = ("bench", "init", "init-simulate", "stress", "stress-summary", "asv", "doctor", "accept", "locate",
              "fleet", "replay", "leakcheck", "copies")
BENCH_DETAIL_ROWS = 400  # full per-size tables fold away; beyond this many rows, only the summary



def by_kind(results) -> dict[str, list]:
    out: dict[str, list] = {}
    for r in results:
        out.setdefault(r.kind, []).append(r)
    return {k: out[k] for k in KIND_ORDER if k in out}


def heading(kind: str) -> str:
    return f"## {KINDS[kind].title}"


def md_table(rows, headers) -> str:
    # tabulate lays a row of fewer cells under the last headers, so a cell left out moves every later number under
    # the wrong column (stress's "stale proven" did): a mismatch is this code's mistake, never the input's
    short = next((r for r in rows if len(r) != len(headers)), None)
    assert short is None, f"{len(short)} cells under {len(headers)} headers: {list(headers)}"
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def _num(v, digits=2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


# --- the report ---------------------------------------------------------------------------------
class Report:
    def __init__(self, opts, mine, others, out: Path):
        self.opts, self.mine, self.others, self.out = opts, mine, others, out
        self.lines: list[str] = []
        self.images: list[Path] = []
        self.flagged = {"regression": 0, "improvement": 0}
        self.history = None  # nccl_bench.report.history.History, where asv results were given

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def image(self, draw, name: str, alt: str) -> None:
        """`draw(path)` draws a PNG at out/name, linked here; with --no-plots nothing is drawn (the figures are
        most of a report's time: docs/report.md)."""
        if not self.opts.plots:
            return
        path = draw(self.out / name)
        self.images.append(path)
        self.add(f"![{alt}]({path.name})", "")

    def link(self, res) -> str:
        rel = os.path.relpath(res.path.resolve(), self.out.resolve())
        return f"[`{res.given}`]({rel})"

    def build(self) -> str:
        """The document; a file whose metadata its section cannot read is one line naming it (UsageError)."""
        self.header()
        for kind, results in by_kind(self.mine).items():
            try:
                getattr(self, "section_" + kind.replace("-", "_"))(results)
            except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError) as e:
                raise UsageError(f"{', '.join(r.given for r in results)}: this {kind} result holds what its section "
                                 f"cannot read ({type(e).__name__}: {str(e)[:80]})") from None
        if self.others:
            self.comparison()
        return "\n".join(self.lines).rstrip() + "\n"

    def header(self) -> None:
        cmd = "python -m nccl_bench report " + " ".join(self.opts.files) + (
            " --compare " + " ".join(self.opts.compare) if self.opts.compare else "") + (
            "" if self.opts.plots else " --no-plots")
        self.add("# nccl-bench report", "",
                 f"Written {time.strftime('%Y-%m-%d %H:%M:%S %Z')} by `{cmd}` (nccl-bench {git_sha() or '?'}).", "",
                 "## Inputs", "")
        rows = []
        for role, group in (("this run", self.mine), ("compared (--compare)", self.others)):
            for r in group:
                extra = r.meta.get("commit") if r.kind == "asv" else r.meta.get("git_sha")
                rows.append([role, self.link(r), r.kind, r.machine,
                             f"{r.backend or '-'}" + (f" x{r.nranks}" if r.nranks else ""),
                             r.versions(), extra or "-", len(r.rows)])
        self.add(md_table(rows, ["role", "file", "kind", "machine", "backend", "versions", "git sha / commit",
                                 "rows"]), "")

    # --- bench --------------------------------------------------------------------------------
    def section_bench(self, results) -> None:
        from nccl_bench.report import plot
        figures = ("Out-of-place solid, in-place dashed; the link's peak and nccl-tests' anchors where known "
                   "for the machine. ") if self.opts.plots else ""
        self.add(heading("bench"), "", f"{figures}Bandwidths in GB/s (1e9 B/s), times in µs, as nccl-tests.", "")
        collectives = list(dict.fromkeys(r["collective"] for res in results for r in res.rows))
        for name in collectives:
            self.image(lambda p, name=name: plot.busbw(results, name, p), f"busbw-{name}.png", f"busbw {name}")
        small = [c for c in collectives
                 if any(r["size"] <= plot.SMALL_BYTES for res in results for r in res.rows if r["collective"] == c)]
        if small and self.opts.plots:  # a heading over its figure alone
            self.add("### Latency at small sizes", "")
            self.image(lambda p: plot.latency(results, small, p), "latency.png", "latency at small sizes")
        for res in results:
            self.add(f"### {res.given}", "")
            summary, detail = [], []
            for (coll, algo, init, how, var), rows in _bench_series(res).items():
                how = how + (f", {var}" if var else "")
                rows.sort(key=lambda r: r["size"])
                best = max(rows, key=lambda r: r["out_of_place"]["bus_bw"])
                wrong = sum((r[p]["nwrong"] or 0) for r in rows for p in ("out_of_place", "in_place"))
                summary.append([coll, algo, init, how, f"{rows[0]['size']}..{rows[-1]['size']}",
                                _num(rows[0]["out_of_place"]["time"]), _num(best["out_of_place"]["bus_bw"]),
                                best["size"], _num(rows[-1]["out_of_place"]["bus_bw"]),
                                _num(rows[-1]["in_place"]["bus_bw"]), wrong])
                detail += [[coll, algo, init, how, r["size"], r["count"], r["type"],
                            _num(r["out_of_place"]["time"]), _num(r["out_of_place"]["bus_bw"]),
                            _num(r["in_place"]["time"]), _num(r["in_place"]["bus_bw"]),
                            _num(r["out_of_place"]["nwrong"]), _num(r["in_place"]["nwrong"])] for r in rows]
            self.add(md_table(summary, ["collective", "algo", "init", "mode", "sizes (B)", "smallest: time µs",
                                        "peak busbw", "at size (B)", "largest: busbw oop", "busbw ip", "#wrong"]), "")
            if len(detail) <= BENCH_DETAIL_ROWS:
                self.add("<details><summary>every size</summary>", "",
                         md_table(detail, ["collective", "algo", "init", "mode", "size (B)", "count", "type",
                                           "oop time µs", "oop busbw", "ip time µs", "ip busbw", "oop #wrong",
                                           "ip #wrong"]), "", "</details>", "")

    # --- init ---------------------------------------------------------------------------------
    def section_init(self, results) -> None:
        from nccl_bench.report import plot
        from nccl_bench.records import init as initrows
        self.add(heading("init"), "", "Boxes: ok inits of measured rounds, every rank; failed inits are counted under "
                 "each mode." if self.opts.plots else "Failed inits are counted under each mode.", "")
        phases = list(initrows.phases_in([r for res in results for r in res.rows]))
        self.image(lambda p: plot.init_phases(results, phases, p), "init-phases.png", "init time per phase and mode")
        for res in results:
            body = [[s["mode"], s["phase"], s["n"], *(_num(None if s[k] is None else s[k] * 1e3) for k in
                                                      ("median", "p90", "p99", "max"))]
                    for s in initrows.summarize(res.rows) if s["key"] != "failed_after_s" or s["n"]]
            self.add(f"### {res.given}", "", md_table(body, ["mode", "phase", "n", "median ms", "p90 ms", "p99 ms",
                                                            "max ms"]), "")
            stale = initrows.stale_rounds(initrows.measured(res.rows))
            for mode, f in initrows.failures(res.rows).items():
                kinds = ", ".join(f"{k} {n}" for k, n in sorted(f["kinds"].items()))
                proof = f"; stale IDs proven in {len(stale[mode])} round(s)" if stale.get(mode) else ""
                self.add(f"- {mode}: {f['failed']} of {f['inits']} inits failed" + (f" ({kinds})" if kinds else "")
                         + proof)
            self.add("")

    def section_init_simulate(self, results) -> None:
        self.add(heading("init-simulate"), "")
        for res in results:
            body = [[r["mode"], _num(r["ranks_per_root"]), r["nranks"], r["nroots"], r["init"],
                     r.get("full_store_ops", "-"), _num(None if r.get("exchange_median_s") is None
                                                       else r["exchange_median_s"] * 1e3),
                     _num(r["wall_s"] * 1e3), f"{r['stale_ranks']}/{r.get('readers', '?')}", r.get("timeouts", 0)]
                    for r in res.rows]
            self.add(f"### {res.given}", "", md_table(body, ["mode", "ranks/root", "ranks", "roots", "init #",
                                                            "store ops", "exchange median ms", "wall ms",
                                                            "stale ranks/readers", "timeouts"]), "")

    # --- stress -------------------------------------------------------------------------------
    def section_stress(self, results) -> None:
        from nccl_bench.report import timeline
        from stress.tally import COLUMNS, cells, summarize
        self.add(heading("stress"), "")
        for res in results:
            self.add(f"### {res.given}", "")
            if res.damaged:
                self.add("Lines cut short by an interrupted write, skipped: " + ", ".join(map(str, res.damaged)), "")
            self.image(lambda p, res=res: timeline.stress_timeline(res, p),
                       f"stress-timeline-{_slug(res.path.stem)}.png", f"stress timeline {res.path.name}")
            modes = list(dict.fromkeys(r["mode"] for r in res.rows))
            self.add(md_table([cells(s, _num) for s in summarize(modes, res.rows)], COLUMNS), "")
            o = res.meta.get("options") or {}
            self.add(f"Options: {', '.join(f'{k}={v}' for k, v in o.items())}.", "")
            ended = [n for n in res.notes if n.get("type") == "duration"]
            if ended:  # why a mode ran fewer rounds than planned
                self.add("Ended by `--duration`: " + "; ".join(
                    f"{n.get('mode')} after round {n.get('after_round')} ({_num(n.get('duration_s'), 0)} s)"
                    for n in ended) + ".", "")
            leaks = next((n.get("leaks") for n in reversed(res.notes) if n.get("type") == "end"), None)
            if leaks:
                self.add("Leak watch (slope per 1,000 inits after the warm-up, 99% interval):", "", md_table(
                    [[f["rank"], f["resource"], f["samples"], _num(f["slope_per_1000"]),
                      " .. ".join(_num(v) for v in f["interval_per_1000"] or []) or "-", f["verdict"]]
                     for f in leaks], ["rank", "resource", "samples", "slope", "interval", "verdict"]), "")
            failed = [r for r in res.rows if r["verdict"] != "ok"]
            if failed:
                self.add("<details><summary>failed rounds and their diagnosis</summary>", "",
                         md_table([[r["mode"], r["round"], r["verdict"], (r.get("diagnosis") or "")[:300]]
                                   for r in failed], ["mode", "round", "verdict", "diagnosis"]), "", "</details>", "")

    def section_stress_summary(self, results) -> None:
        self.add(heading("stress-summary"), "",
                 "A summary has no per-round data: pass the journal for the timeline.", "")
        from stress.tally import COLUMNS, cells
        for res in results:
            self.add(f"### {res.given}", "", md_table([cells(r, _num) for r in res.rows], COLUMNS), "",
                     f"Journal: `{res.meta.get('journal', '?')}`.", "")

    # --- the rest -----------------------------------------------------------------------------
    def section_asv(self, results) -> None:
        """asv results as history (nccl_bench.report.history judges, historysection writes)."""
        from nccl_bench.records.reading import asv_units
        from nccl_bench.report import history, historysection
        self.history = history.build(results, asv_units(self.mine, results))
        historysection.write(self, self.history, md_table, _num)

    def section_doctor(self, results) -> None:
        self._generic("doctor", results)

    def section_accept(self, results) -> None:
        from nccl_bench.report.nodesections import accept_lines
        self.add(heading("accept"), "")
        for res in results:
            self.add(*accept_lines(res, md_table))

    def section_locate(self, results) -> None:
        from nccl_bench.report.nodesections import locate_heatmap, locate_lines
        self.add(heading("locate"), "")
        for res in results:
            self.add(*locate_lines(res, md_table))
            if res.rows:
                self.image(lambda p, res=res: locate_heatmap(res, p), f"locate-{res.path.stem}.png",
                           f"pair matrix {res.path.name}")

    def section_replay(self, results) -> None:
        from nccl_bench.report.kindsections import replay_lines
        self.add(heading("replay"), "",
                 "Each distinct call, its median time here against the job's own (its ready time where the "
                 "trace has it); SLOWER: beyond the spread of both.", "")
        for res in results:
            self.add(*replay_lines(res, md_table, _num))

    def section_fleet(self, results) -> None:
        from nccl_bench.report.kindsections import fleet_lines
        self.add(heading("fleet"), "")
        for res in results:
            self.add(*fleet_lines(res, md_table, _num))

    def section_leakcheck(self, results) -> None:
        self._generic("leakcheck", results)

    def section_copies(self, results) -> None:
        self._generic("copies", results)

    def _generic(self, kind: str, results) -> None:
        self.add(heading(kind), "")
        for res in results:
            keys = [k for k in dict.fromkeys(k for r in res.rows for k in r)
                    if all(not isinstance(r.get(k), (dict, list)) for r in res.rows)][:8]
            body = [[_short(r.get(k)) for k in keys] for r in res.rows]
            self.add(f"### {res.given}", "", md_table(body, keys), "")

    # --- comparison ---------------------------------------------------------------------------
    def comparison(self) -> None:
        from nccl_bench.report import comparisonsection
        comparisonsection.write(self, by_kind, md_table, _num)

    def count(self, rows) -> None:
        for r in rows:
            if r["verdict"] in self.flagged:
                self.flagged[r["verdict"]] += 1


def _bench_series(res) -> dict[tuple, list]:
    from nccl_bench.report.plot import series_key
    out: dict[tuple, list] = {}
    for r in res.rows:
        out.setdefault((r["collective"], *series_key(res, r)), []).append(r)
    return out


def _short(v) -> str:
    text = "-" if v is None else str(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)
