"""Verdicts and diagnoses from every rank's evidence, gathered through the store after a round.

Each root publishes one ID per init; every rank records the fingerprints it used. A rank
whose fingerprint for root k differs from what root k published this round read a stale
key; the history of published fingerprints names the round it came from.
"""
from __future__ import annotations

from nccl_bench.comm.bootstrap import root_ranks
from stress.record import RankRecord

# The field guide's three categories (hangs, errors, silent corruption).
CATEGORY = {"ok": None, "hang": "hang", "error": "error", "wrong": "silent corruption",
            "stale": "hang (stale ID caught before init)"}
PHASES = ("start", "skew", "bootstrap", "init", "verify", "destroy")
_OP_PHASE = {"id-exchange": "bootstrap", "init": "init", "check-ids": "init", "destroy": "destroy"}


class History:
    """The fingerprints published in the last KEEP rounds: fingerprint -> (mode, round, root). A stale
    read comes from the round before, or a few before: older IDs are let go, so a soak's memory does
    not grow with its rounds."""

    KEEP = 64  # a stale key is one init old, rarely a few: 64 rounds back is plenty

    def __init__(self, keep: int = KEEP) -> None:
        self.by_fp: dict[str, tuple[str, int, int]] = {}  # insertion order = oldest first
        self.keep = keep
        self.rounds: dict[tuple[str, int], list[str]] = {}  # (mode, round) -> its fingerprints, oldest first

    def add(self, mode: str, round_: int, records: list[RankRecord | None]) -> None:
        fps = []
        for root, fp in published(records).items():
            if fp not in self.by_fp:
                self.by_fp[fp] = (mode, round_, root)
                fps.append(fp)
        self.rounds[(mode, round_)] = self.rounds.get((mode, round_), []) + fps
        while len(self.rounds) > self.keep:
            for fp in self.rounds.pop(next(iter(self.rounds))):
                self.by_fp.pop(fp, None)

    def origin(self, fp: str, mode: str) -> str:
        if fp in ("-", "?", ""):
            return "no ID at all (key missing)"
        if fp not in self.by_fp:
            return f"an earlier init not in this run's last {self.keep} rounds"
        m, r, _ = self.by_fp[fp]
        return f"round {r}" if m == mode else f"{m} round {r}"


def published(records: list[RankRecord | None]) -> dict[int, str]:
    """root -> fingerprint it published this round (from the roots' own evidence)."""
    out = {}
    for rec in records:
        ev = rec.evidence if rec else None
        if ev and ev.get("published_root", -1) >= 0 and ev.get("published"):
            out[ev["published_root"]] = ev["published"]
    return out


def stale_reads(records: list[RankRecord | None], nranks: int, history: History, mode: str) -> list[dict]:
    """Every (rank, root) where the rank used an ID its root did not publish this round."""
    pub = published(records)
    evidence = [(rec.rank, rec.evidence) for rec in records if rec and rec.evidence]
    roots = root_ranks(nranks, max([len(ev["fingerprints"]) for _, ev in evidence] + [1]))
    out = []
    for rank, ev in evidence:
        for k, fp in enumerate(ev["fingerprints"]):
            if k in pub and fp != pub[k]:
                out.append({"rank": rank, "root": k, "root_rank": roots[k] if k < len(roots) else None,
                            "used": fp, "current": pub[k], "from": history.origin(fp, mode)})
    return out


def in_time_order(records: list[RankRecord | None]) -> list[RankRecord]:
    """The ranks whose round ended in an error or a hang, the first in time first where every one says when
    (its error's `at_s`, from the round's start: stress.round.Round.when); else in rank order."""
    failed = [rec for rec in records if rec and rec.error and rec.verdict in ("error", "hang")]
    if all(rec.error.get("at_s") is not None for rec in failed):
        failed.sort(key=lambda rec: rec.error["at_s"])
    return failed


def timed(failed: list[RankRecord]) -> bool:
    return bool(failed) and all(rec.error.get("at_s") is not None for rec in failed)


def verdict(records: list[RankRecord | None], missing: list, died: bool = False) -> str:
    kinds = {rec.verdict for rec in records if rec}
    if died:  # a process crashed (the guide's errors); the survivors' hangs follow from it
        return "error"
    failed = in_time_order(records)
    if timed(failed):  # the first cause's kind: a deadline that passed first, and the errors that followed it
        return failed[0].verdict
    for v in ("error", "hang", "wrong", "stale"):
        if v in kinds or (v == "hang" and missing):
            return v
    return "ok"


def op_phase(err: dict) -> str:
    """The phase an error happened in: init ops by name, the collective's name means verify."""
    return err.get("phase") or _OP_PHASE.get(err["op"], "verify")


def culprits(records: list[RankRecord | None], missing: list, context: dict) -> list[dict]:
    """Ranks the evidence points at, each with its phase and cause (rank, phase, cause, words)."""
    out = []
    if context.get("store_lost"):
        lost = context["store_lost"]
        out.append({"rank": 0, "phase": lost.get("phase", "?"), "cause": "store lost",
                    "words": f"job store lost: its host (rank 0) went away; rank {lost['rank']} got "
                             f"{lost['error']} in {lost.get('phase', '?')}, so no rank's evidence can be compared"})
    last = {r: p for r, p in (context.get("last_phase") or {}).items()}
    for rec in records:
        if rec:
            last[rec.rank] = rec.last_phase
    dead = context.get("dead") or {}
    for r in sorted(dead):
        d, phase = dead[r], last.get(r) or "start"
        how = f", killed by {d['signal']}" if d.get("signal") else ""
        out.append({"rank": r, "phase": phase, "cause": "died",
                    "words": f"rank {r} died during {phase} (process {d['pid']} on {d['host']} is gone{how})"})
    stuck = [rec for rec in records if rec and rec.error and rec.verdict in ("hang", "error")]
    if stuck:
        where = min((op_phase(rec.error) for rec in stuck), key=PHASES.index)
        ops = sorted({rec.error["op"] for rec in stuck if op_phase(rec.error) == where})
        waited = sorted(rec.rank for rec in stuck if op_phase(rec.error) == where)
        for rec in records:
            if not rec or rec.rank in dead or rec.rank in waited:
                continue
            mine = last.get(rec.rank)
            if mine is None:
                out.append({"rank": rec.rank, "phase": where, "cause": "did not join",
                            "words": f"rank {rec.rank} never entered {where}: it did not join the round "
                                     f"(ranks {', '.join(map(str, waited))} waited for it in {'/'.join(ops)})"})
            elif PHASES.index(mine) < PHASES.index(where):
                out.append({"rank": rec.rank, "phase": where, "cause": "never entered",
                            "words": f"rank {rec.rank} never entered {where} ({'/'.join(ops)}; its last phase: "
                                     f"{mine}) while ranks {', '.join(map(str, waited))} waited in it: unbalanced "
                                     "control flow (a rank skipped the collective or is stuck elsewhere)"})
    late = {rec.rank: rec.late_s for rec in records if rec and rec.late_s is not None}
    timeout = context.get("timeout")
    if timeout and len(late) > 1:
        first = min(late, key=late.get)
        for r, s in sorted(late.items()):
            if s - late[first] > timeout:
                out.append({"rank": r, "phase": "skew", "cause": "slow",
                            "words": f"rank {r} started its init {s - late[first]:.1f} s after rank {first}, past the "
                                     f"{timeout:g} s deadline: a slow rank"})
    for rec in records:
        if rec and rec.input_wrong:
            out.append({"rank": rec.rank, "phase": "verify", "cause": "input corrupted",
                        "words": f"rank {rec.rank}'s input already differed from the table before the collective "
                                 f"({rec.input_wrong} elements): corrupted at the source"})
    return out


def judge(mode: str, round_: int, nranks: int, records: list[RankRecord | None], missing: list[tuple[int, str]],
          history: History, context: dict | None = None) -> dict:
    """The round's verdict and, for a failure, the diagnosis in words; then remember its IDs.

    `context` adds what the records cannot say: the deadline (`timeout`), ranks found dead
    (`dead`: rank -> pid, host, signal), the last phase the store saw for a missing rank
    (`last_phase`), and a lost store (`store_lost`: rank, error, phase).
    """
    context = context or {}
    v = verdict(records, missing, bool(context.get("dead")))
    if context.get("store_lost"):
        v = "error"
    stale = stale_reads(records, nranks, history, mode)
    errors = [rec.error for rec in records if rec and rec.error]
    failed = in_time_order(records)
    if timed(failed):
        first = failed[0].error
    else:
        first = next((e for e in errors if e["kind"] == "error"), errors[0] if errors else None)
    row = {"verdict": v, "category": CATEGORY[v], "wrong": sum(rec.wrong for rec in records if rec),
           "stale": stale, "missing": [r for r, _ in missing], "error": first, "culprits": [], "diagnosis": None}
    if v != "ok":
        found = culprits(records, missing, context)
        row["culprits"] = [{k: c[k] for k in ("rank", "phase", "cause")} for c in found]
        row["diagnosis"] = explain(v, records, missing, stale, first, row["wrong"], [c["words"] for c in found],
                                   context.get("hosts"))
    history.add(mode, round_, records)
    return row


def cut_off(hosts: list[str] | None, missing: set[int]) -> list[str]:
    """Across nodes: each node none of whose ranks arrived, while other nodes' did (a node that dropped off
    the network, or went down)."""
    if not hosts or len(set(hosts)) < 2:
        return []
    out = []
    for h in sorted(set(hosts)):
        mine = [r for r, x in enumerate(hosts) if x == h]
        if h and all(r in missing for r in mine) and len(missing) < len(hosts):
            out.append(f"{h} unreachable: none of its ranks ({', '.join(map(str, mine))}) arrived while the other "
                       "nodes' did")
    return out


def explain(v: str, records, missing, stale, first, wrong: int, found: list[str] = (),
            hosts: list[str] | None = None) -> str:
    parts = []
    def on(r) -> str:  # across nodes, every rank named comes with its node; on one host, no such words
        many = hosts and len(set(hosts)) > 1
        return f" on {hosts[r]}" if many and r is not None and r < len(hosts) else ""
    if stale:
        caught = " caught before init" if v == "stale" else ""
        reads = "; ".join(
            f"rank {s['rank']}{on(s['rank'])} {'held' if caught else 'used'} root {s['root']}'s ID from {s['from']}"
            + (f" (root {s['root']} is rank {s['root_rank']}{on(s['root_rank'])})"
               if s["root_rank"] not in (None, s["root"]) or on(s["root_rank"]) else "")
            for s in stale)
        parts.append(f"stale ID{caught}: {reads}")
    parts.extend(found)
    if not stale:
        fps = {tuple((rec.evidence or {}).get("fingerprints") or ()) for rec in records if rec}
        fps.discard(())
        if len(fps) > 1:
            parts.append("ranks used different IDs: " + "; ".join(
                f"rank {rec.rank} {rec.evidence['fingerprints']}" for rec in records
                if rec and rec.evidence))
        elif fps:
            parts.append(f"no stale ID (every rank used {list(next(iter(fps)))})")
    dead = {int(w.split()[1]) for w in found if " died during " in w}
    missing = [(r, h) for r, h in missing if r not in dead]
    if missing:
        parts.append("never arrived: " + ", ".join(f"rank {r} ({h or 'host unknown'})" for r, h in missing))
        parts.extend(cut_off(hosts, {r for r, _ in missing}))
    if v == "wrong":
        bad = [f"rank {rec.rank}: {rec.wrong}" for rec in records if rec and rec.wrong]
        parts.append(f"{wrong} wrong elements ({', '.join(bad)})")
        sources = sorted({s for rec in records if rec and rec.wrong_from for s in rec.wrong_from})
        if sources:
            parts.append("the wrong elements came from the data of rank " + ", ".join(map(str, sources)))
        if not any(rec and rec.input_wrong for rec in records):
            parts.append("every rank's input matched the table: corrupted in transit or in the reduction")
    if first is not None and v in ("error", "hang"):
        failed = in_time_order(records)
        several = timed(failed) and len(failed) > 1
        parts.append(("first: " if several else "") + failure_words(first))
        after = next((rec.error for rec in failed[1:] if (rec.error["kind"], rec.error["op"]) !=
                      (first["kind"], first["op"])), None) if several else None
        if after is not None:
            parts.append("then: " + failure_words(after))
    hung = sorted(rec.rank for rec in records if rec and rec.verdict == "hang")
    if hung and v != "hang" or (v == "hang" and len(hung) > 1):
        parts.append("deadline passed on ranks " + ", ".join(map(str, hung)))
    return "; ".join(parts)


def failure_words(err: dict) -> str:
    """'hang on rank 2 in init: deadline exceeded (3.02 s into the round, 2.41 s into init)'."""
    detail = f": {err['detail']}" if err.get("detail") else ""
    when = ""
    if err.get("at_s") is not None:
        phase = err.get("last_phase") or op_phase(err)
        when = f" ({err['at_s']:.2f} s into the round, {err['phase_s']:.2f} s into {phase})"
    return f"{err['kind']} on rank {err['rank']} in {err['op']}: {err['lib_error']}{detail}{when}"
