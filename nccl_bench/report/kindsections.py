"""Report sections for the kinds that carry one job's or one fleet's verdict: replay (each distinct call
here against the job, the whole sequence), fleet (the flagged nodes and each node's metrics), and the
smaller kinds (leakcheck, copies) as plain tables."""
from __future__ import annotations


def replay_lines(res, table, num) -> list[str]:
    """`table(body, headers)` renders markdown, `num(v)` a number; the section's lines for one replay file."""
    rp, seq = res.block("replay"), res.block("sequence")
    out = [f"### {res.given}: {rp.get('source', '?')} of {rp.get('trace_nranks', '?')} rank(s), replayed on "
           f"{rp.get('nranks', '?')}", ""]
    if res.meta.get("listed"):
        out += ["Listed only (`replay --list`): nothing ran.", ""]
    if seq:
        against = {"ready_us": "the job's ready time", "duration_us": "the job's whole durations"}.get(
            seq.get("trace_of"), "no time of the job")
        out += [f"Sequence per pass: {num(seq.get('here_median_us'), 1)} µs here (quartiles "
                f"{num(seq.get('here_p25_us'), 1)}..{num(seq.get('here_p75_us'), 1)}), "
                f"{num(seq.get('trace_us'), 1)} µs in the job ({against}); ratio {num(seq.get('ratio'))}.", ""]
    body = [[r["collective"], r["bytes"], r["dtype"], ",".join(map(str, r["group_ranks"])), r["calls"],
             num(r.get("time_us"), 1), num(r.get("busbw")), num(r.get("trace_ready_us") or r.get("trace_time_us"), 1),
             num(r.get("ratio")), "SLOWER" if r.get("slower") else "", r.get("nwrong") or 0] for r in res.rows]
    if body:
        out += [table(body, ["call", "bytes", "dtype", "ranks", "calls/pass", "here µs", "busbw", "job µs",
                             "ratio", "", "#wrong"]), ""]
    for key in ("skipped", "stopped", "notes"):
        said = rp.get(key) or []
        if said:
            out += [f"{key.capitalize()}:", "", *(f"- {_line(s)}" for s in said[:20]),
                    *([f"- ... {len(said) - 20} more"] if len(said) > 20 else []), ""]
    return out


def fleet_lines(res, table, num) -> list[str]:
    flagged = [r for r in res.rows if r.get("flagged")]
    out = [f"### {res.given}: {len(flagged)} of {len(res.rows)} node(s) flagged", ""]
    out += [f"- **{r['node']}**: " + "; ".join(r.get("reasons") or []) for r in flagged]
    metrics = sorted(res.block("fleet"))
    if metrics:
        body = [[r["node"], *(num(r.get(m)) for m in metrics)] for r in res.rows]
        out += ["", table(body, ["node", *metrics])]
    return out + [""]


def _line(s) -> str:
    return s if isinstance(s, str) else "; ".join(f"{k}: {v}" for k, v in s.items()) if isinstance(s, dict) else str(s)
