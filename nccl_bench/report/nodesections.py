"""Report sections for the files that judge a node: accept (verdicts against a profile, and where
the profile came from) and locate (suspects, the pair matrix, the per-GPU check)."""
from __future__ import annotations

from pathlib import Path


def accept_lines(res, table) -> list[str]:
    """`table(body, headers)` renders markdown; returns the section's lines for one accept file."""
    m = res.meta
    doc = m.get("profile_doc") or {}
    out = [f"### {res.given}: {m.get('verdict', '?')} against {m.get('profile', '?')} "
           f"({m.get('profile_origin', 'built-in')})", ""]
    if doc.get("source"):
        out += [f"Profile source: {doc['source']}", ""]
    der = doc.get("derivation") or {}
    if der.get("transport"):
        inputs = ", ".join(f"{k}={v}" for k, v in (der.get("inputs") or {}).items())
        out += [f"Derived: {der['transport']} at {der.get('bottleneck_GBps') or 0:.0f} GB/s per GPU, "
                f"margin {der.get('margin')}; inputs: {inputs}", ""]
    body = [[r.get("status", "").upper(), r.get("check"), _g(r.get("measured")), r.get("required"),
             r.get("detail") or ""] for r in res.rows]
    return out + [table(body, ["result", "check", "measured", "required", "detail"]), ""]


MAX_LOCATE_RANKS = 4096  # a pair matrix of more ranks is no job's (16 M cells already); a check per rank
MAX_SUSPECTS_LISTED = 100  # a file's word: a run names a few (a rank, a node, a pair)


def locate_lines(res, table) -> list[str]:
    """The section's lines for one locate file (its heatmap: locate_heatmap)."""
    m = res.meta
    nodes = m.get("nodes") or []
    out = [f"### {res.given}: {m.get('verdict', '?')} ({len(nodes)} rank(s) on {len(set(nodes))} node(s))", ""]
    suspects = m.get("suspects") or []
    for s in suspects[:MAX_SUSPECTS_LISTED]:
        out.append(f"- SUSPECT {s.get('who')}: " + "; ".join(s.get("evidence") or []))
    if len(suspects) > MAX_SUSPECTS_LISTED:
        out.append(f"- and {len(suspects) - MAX_SUSPECTS_LISTED} more suspect(s) in the file")
    if m.get("single_rank"):
        out.append("- one rank: no pair or half to compare; the GPU was checked on its own")
    checks = [(r, c.get("gpu") or {}) for r, c in enumerate((m.get("checks") or [])[:MAX_LOCATE_RANKS]) if c]
    rows = [[r, _n(g.get("copy_GBps")), _n(g.get("h2d_GBps")), _n(g.get("d2h_GBps")), g.get("why", "")]
            for r, g in checks if g]
    if rows:
        out += ["", table(rows, ["rank", "device copy GB/s", "host to device GB/s", "device to host GB/s", "note"])]
    return out + [""]


def locate_heatmap(res, path: Path) -> Path:
    """The pair matrix of a locate file with pairs, drawn at `path`."""
    from nccl_bench.core.figures import pair_heatmap
    n = 1 + max(max(r["src"], r["dst"]) for r in res.rows)  # the pairs' ranks, never the file's word for them
    if n > MAX_LOCATE_RANKS:
        raise ValueError(f"rank {n - 1} in its pairs, more than one job's {MAX_LOCATE_RANKS} ranks")
    cells = [(r["src"], r["dst"], r["ratio"], r["slow"]) for r in res.rows]
    return pair_heatmap(cells, n, f"locate: busbw / class median ({res.path.name})", path)


def _g(v) -> str:
    return "-" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def _n(v) -> str:
    return "-" if v is None else f"{v:.1f}"
