"""Init rows read back: per mode and phase the order statistics of ok inits, the failed inits
and their kinds, and the rounds whose IDs prove a stale read. Shared by `init`'s table, accept, asv and the
report."""
from __future__ import annotations

from nccl_bench.core import stats

# The phases of an init as `init` reports them: (label, row key). "init" is the whole create call as its
# caller waits for it, timed from outside (the wait before a communicator is ready); exchange and create
# are the backend's timers inside it and "rest" what they do not cover; "lifetime" is the whole life, from
# before create to after destroy (the anchors' "init" is create alone: they list the exchange apart).
# Files written before these existed lack init_rest_s and lifetime_s (their init_s was exchange + create).
PHASES = (("id exchange", "exchange_s"), ("create (until ready)", "create_s"),
          ("rest of the create call", "init_rest_s"), ("init: the whole create call", "init_s"),
          ("first collective", "first_collective_s"), ("destroy", "destroy_s"),
          ("lifetime: create to destroyed", "lifetime_s"))


def phases_in(rows: list[dict]) -> tuple:
    """The PHASES these rows hold (files written before init_rest_s and lifetime_s lack them)."""
    return tuple((label, key) for label, key in PHASES if any(key in r for r in rows))


def measured(rows: list[dict]) -> list[dict]:
    return [r for r in rows if not r["warmup"]]


def stale_rounds(rows: list[dict]) -> dict[str, list[int]]:
    """Per mode, rounds in which some rank used an ID its root did not publish in that round."""
    by_init: dict[tuple, list[dict]] = {}
    for r in rows:
        by_init.setdefault((r["mode"], r["round"]), []).append(r)
    out: dict[str, list[int]] = {}
    for (mode, rnd), group in sorted(by_init.items()):
        published = {r["published_root"]: r["published"] for r in group
                     if r["published_root"] is not None and r["published_root"] >= 0 and r["published"]}
        stale = any(root in published and fp != published[root]
                    for r in group for root, fp in enumerate(r["ids"] or []))
        out.setdefault(mode, [])
        if stale:
            out[mode].append(rnd)
    return out


def summarize(rows: list[dict]) -> list[dict]:
    """Per mode and phase: {mode, phase, key, n, median, p90, p99, max} over ok inits of measured
    rounds (all ranks); plus per mode a 'failed' entry with the failed inits' time to failure."""
    out = []
    rows = measured(rows)
    held = phases_in(rows)
    for mode in dict.fromkeys(r["mode"] for r in rows):
        mine = [r for r in rows if r["mode"] == mode]
        ok = [r for r in mine if r["outcome"] == "ok"]
        for label, key in held:
            out.append({"mode": mode, "phase": label, "key": key, **stats.summary(r.get(key) for r in ok)})
        failed = [r for r in mine if r["outcome"] != "ok"]
        out.append({"mode": mode, "phase": "failed: time to failure", "key": "failed_after_s",
                    **stats.summary(r["failed_after_s"] for r in failed), "n": len(failed)})
    return out


def failures(rows: list[dict]) -> dict[str, dict]:
    """Per mode: inits, failed inits and their kinds, over measured rounds (all ranks)."""
    out: dict[str, dict] = {}
    for r in measured(rows):
        f = out.setdefault(r["mode"], {"inits": 0, "failed": 0, "kinds": {}})
        f["inits"] += 1
        if r["outcome"] != "ok":
            f["failed"] += 1
            f["kinds"][r["outcome"]] = f["kinds"].get(r["outcome"], 0) + 1
    return out
