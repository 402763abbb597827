"""The report's history section: per machine, the regressions the history names (the most certain
first), the series too noisy to judge, and per benchmark its plot and its values across commits."""
from __future__ import annotations

from nccl_bench.report import history, historyplot

COLUMNS = 12  # a history table shows the newest commits; the plots show them all


def write(doc, h: history.History, table, num) -> None:
    """Adds the section to `doc` (report.document.Report); `table(body, headers)` renders markdown and
    `num(v, digits)` a number."""
    doc.add("## History (asv)", "",
            f"Each benchmark's value per commit (asv's median of its samples), oldest first. A regression "
            f"is a step to a worse level (up for a time, down for a rate) that the newest commit still has: "
            f"the levels right either side of it (asv's step detection) differ by more than "
            f"{history.THRESHOLD:.0%} and by more than twice the series' own run-to-run spread, and the runs' "
            f"interquartile ranges either side do not overlap. The most certain first (change over noise). A step that "
            f"fails the noise tests is too noisy to judge: listed, not named.", "")
    for machine, commits in h.commits.items():
        versions = "; ".join(dict.fromkeys(historyplot.versions(c.versions) for c in commits if c.versions))
        doc.add(f"### {machine}: {len(commits)} commit(s), {commits[0].short} .. {commits[-1].short}", "",
                f"Versions: {versions or 'versions unknown'}.", "")
        found = [r for r in h.regressions if r.machine == machine]
        doc.add(table([[r.benchmark, r.params or "-", r.last_good.short, r.first_bad.short, num(r.before, 6),
                        num(r.after, 6), f"{r.change:+.1%}", "-" if r.spread is None else f"{r.spread:.1%}",
                        f"{r.stands_out:.1f}"] for r in found],
                      ["benchmark", "params", "last good", "first bad", "before", "after", "change",
                       "runs' spread", "stands out (x)"]) if found else "No regression.", "")
        noisy = [n for n in h.noisy if n.machine == machine]
        if noisy:
            doc.add(f"Too noisy to judge ({len(noisy)} series, not named):", "",
                    table([[n.benchmark, n.params or "-", n.why] for n in noisy], ["benchmark", "params", "why"]), "")
        shown = commits[-COLUMNS:]
        for name in h.benchmarks(machine):
            series = h.of(machine, name)
            slug = f"{machine}-{name}".replace("/", "_")
            doc.image(lambda p, name=name: historyplot.benchmark(h, machine, name, p), f"history-{slug}.png",
                      f"{name} on {machine} across commits")
            body = [[s.params or "-", *(num(v, 6) for v in s.values[-COLUMNS:])] for s in series]
            doc.add(f"<details><summary>{name} ({series[0].unit or 'no unit'}), {len(series)} parameter "
                    f"set(s)</summary>", "", table(body, ["params", *(c.short for c in shown)]), "",
                    "</details>", "")
