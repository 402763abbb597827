"""The report's comparison section: this run against --compare's, kind by kind, each by its rule
(nccl_bench.report.compare), flagged only beyond the measured spread."""
from __future__ import annotations

from nccl_bench.report import compare
from nccl_bench.report.compare import COMPARABLE


def write(doc, by_kind, md_table, _num) -> None:
    """Adds the section to `doc` (report.document.Report); `md_table(body, headers)` renders markdown,
    `_num(v, digits)` a number, `by_kind(results)` groups results by kind in the report's order."""
    from nccl_bench.report import plot
    doc.add("## Comparison with the --compare run", "",
            "Ratios are this run / the compared run. A row is a regression or an improvement only when "
            "the difference is beyond the measured spread; the rule is given per kind.", "")
    mine, others = by_kind(doc.mine), by_kind(doc.others)
    for kind in dict.fromkeys([*mine, *others]):
        if kind not in COMPARABLE:
            doc.add(f"- {kind}: not compared (no comparison is defined for this kind).", "")
            continue
        if kind not in mine or kind not in others:
            side = "this run" if kind not in mine else "the compared run"
            doc.add(f"- {kind}: {side} has no {kind} file; nothing to compare.", "")
            continue
        a, b = mine[kind], others[kind]
        title = (f"{', '.join(r.path.name for r in a)} vs {', '.join(r.path.name for r in b)}\n"
                 + " | ".join(dict.fromkeys(r.title() for r in a + b)))
        doc.add(f"### {kind}", "", f"Rule: {compare.RULES[kind]}.", "")
        if kind == "bench":
            rows = compare.bench(a, b)
            doc.count(rows)
            series = compare.bench_series(rows)
            doc.add(md_table([[s["collective"], s["series"], s["points"], _num(s["median_ratio"], 3),
                               f"{s['threshold']:.1%}", s["regressions"], s["improvements"], s["verdict"]]
                              for s in series], ["collective", "series", "points", "median ratio",
                                                 "flag beyond", "regressions", "improvements", "verdict"]), "")
            flagged = [r for r in rows if r["verdict"] != "no change"]
            if flagged:
                doc.add("<details><summary>flagged sizes</summary>", "", md_table(
                   [[r["collective"], r["series"], r["place"], r["size"], f"{r['base_busbw']:.4g}",
                     f"{r['new_busbw']:.4g}", _num(r["ratio"], 3), r["verdict"]] for r in flagged],
                   ["collective", "series", "placement", "size (B)", "busbw compared", "busbw this",
                    "ratio", "verdict"]), "", "</details>", "")
            for name in dict.fromkeys(r["collective"] for r in rows):
                doc.image(lambda p, name=name: plot.compare_bench(rows, name, title, p), f"compare-bench-{name}.png",
                          f"busbw ratio {name}")
            if not rows:
                doc.add("No (collective, algo, init, size) in common.", "")
            continue
        rows = getattr(compare, kind)(a, b)
        doc.count(rows)
        unit = {"init": "ms", "stress": "", "asv": ""}[kind]
        scale = 1e3 if kind == "init" else 1.0
        body = [[r["group"], r["item"], _fmt_value(r, "base", scale), _fmt_value(r, "new", scale),
                 _num(r["ratio"], 3), "-" if r["threshold"] is None else f"{r['threshold']:.1%}", r["verdict"]]
                for r in rows]
        doc.add(md_table(body, ["group", "item", f"compared {unit}".strip(), f"this {unit}".strip(), "ratio",
                                "flag beyond", "verdict"]) if rows else "Nothing in common.", "")
        drawn = [r for r in rows if r["ratio"] is not None and r["item"] != "failure rate"]
        if drawn:
            ylabel = {"init": "median time ratio (this / compared; > 1 is slower)",
                      "stress": "ratio of medians (this / compared)",
                      "asv": "value ratio (this / compared)"}[kind]
            doc.image(lambda p: plot.compare_bars(drawn, kind, ylabel, title, p), f"compare-{kind}.png",
                      f"{kind} ratios")
    doc.add(f"**Comparison verdict: {doc.flagged['regression']} regression(s), "
            f"{doc.flagged['improvement']} improvement(s)** beyond the measured spread"
            + (" (no change)." if not any(doc.flagged.values()) else "."), "")


def _fmt_value(row: dict, key: str, scale: float) -> str:
    v = row[key]
    if v is None:
        return "-"
    if row["item"] == "failure rate":
        return f"{v:.0%} of {row['n_' + key]}"
    return f"{v * scale:.3f}"
