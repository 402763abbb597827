"""Stress as a soak instrument: what it keeps is bounded in rounds, and the leak watch names a leak
(resource, rank, bytes per init) from samples, or says there is none."""
from __future__ import annotations

import json
import os
import random

import pytest

from helpers import run
from nccl_bench.comm import gloo
from nccl_bench.comm.base import torch_defaults
from nccl_bench.core import resources
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.stats import percentile
from nccl_bench.core.streaming import EXACT_CAP, Quantiles, Trend
from nccl_bench.core.leaks import LeakWatch, floor_of
from stress.diagnose import History
from stress.inject import Injection
from stress.keeper import ranges
from stress.record import RankRecord
from stress.storekeys import Sweeper, own_keys
from nccl_bench import records

ARGS = ["-m", "stress", "--backend", "gloo", "--nranks", "2", "--skew-max", "0", "--leak-every", "10"]


def summary(tmp_path) -> dict:
    return json.loads(next(tmp_path.glob("j-summary*.json")).read_text())


def test_a_planted_leak_is_named_at_its_rate_and_only_there(tmp_path):
    proc = run([*ARGS, "--rounds", "300", "--inject", "leak@0:1=64K", "--fail-on-leak",
                "--journal", str(tmp_path / "j.jsonl")], timeout=120)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    leaks = [line for line in proc.stdout.splitlines() if line.startswith("LEAK")]
    assert len(leaks) == 1 and "rss_bytes on rank 1" in leaks[0], proc.stdout
    found = [f for f in summary(tmp_path)["leaks"] if f["verdict"] == "LEAK"]
    assert [(f["rank"], f["resource"]) for f in found] == [(1, "rss_bytes")]
    assert abs(found[0]["per_init"] / 65536 - 1) < 0.2, found[0]  # named at its rate, within 20 %


def test_a_clean_run_says_no_leak_and_its_store_stays_flat(tmp_path):
    proc = run([*ARGS, "--rounds", "300", "--fail-on-leak", "--journal", str(tmp_path / "j.jsonl")], timeout=120)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "no LEAK" in proc.stdout and "LEAK:" not in proc.stdout, proc.stdout
    keys = [f for f in summary(tmp_path)["leaks"] if f["resource"] == "store_keys"]
    assert keys and keys[0]["rank"] == 0 and keys[0]["last"] < 200, keys  # a few rounds' keys, not 300


def test_init_leak_check_samples_a_bare_loop(tmp_path):
    out = tmp_path / "lc.json"
    proc = run(["-m", "nccl_bench", "init", "--backend", "gloo", "--nranks", "2", "--leak-check", "60",
                "--leak-every", "5", "--leak-warmup", "10", "--json", str(out)], timeout=120)
    assert proc.returncode in (0, 1), (proc.stdout, proc.stderr)
    doc = records.load(str(out))
    assert {r["resource"] for r in doc.rows} >= {"rss_bytes", "fds", "threads", "store_keys"}
    assert all(r["samples"] >= 5 for r in doc.rows), doc.rows
    assert "leak watch:" in proc.stdout and "60 inits in" in proc.stdout


def test_the_cpu_model_keeps_what_torch_keeps_per_init_small(monkeypatch):
    # torch keeps ~140 B for every thread that ever ran a gloo collective and ~250 B for every group its
    # flight recorder saw (results/cpu/soak): one worker thread per communicator, the recorder off unless
    # the user sized it, one transport per process
    for var in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"):
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    opts = gloo._options(Deadline(5))
    assert opts._threads == 1 and os.environ["TORCH_FR_BUFFER_SIZE"] == "0"
    assert gloo._devices() is gloo._devices()
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "2000")
    torch_defaults()
    assert os.environ["TORCH_FR_BUFFER_SIZE"] == "2000"


# --- the pure parts --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode, swept", [("scoped", True), ("stock", False), ("regular", False)])
def test_a_torch_init_under_its_own_prefix_leaves_its_id_key_to_the_sweeper(mode, swept):
    # PyTorch publishes each root's ID under the group's store prefix; a scoped restart's prefix is this
    # init's alone (2 keys per init stayed for good on 2 x H100 before), stock's keys are overwritten
    import torch.distributed as dist
    from nccl_bench.comm.plan import InitPlan
    from nccl_bench.comm.torch_pg import RecordingStore, TorchCommunicator, _scope
    plan = InitPlan(rank=1, nranks=2, mode=mode, ranks_per_root=1, counter=5, store=None, namespace="stress")
    comm = TorchCommunicator()
    comm._store = RecordingStore(dist.PrefixStore(_scope(plan), dist.HashStore()))
    comm._store.inner.set("0//cuda//UniqueNCCLID:0", bytes(128))  # root 0's, published on its rank
    comm._store.set("0//cuda//UniqueNCCLID:1", bytes(128))  # this rank's, as PyTorch publishes it
    comm._store.get("0//cuda//UniqueNCCLID:0")
    comm._record(plan)
    keys = own_keys(5, 1, RankRecord(1, evidence=comm.ids_used.evidence()), behind=True, check_ids=False, held=False)
    assert ("torch/stress/5/0//cuda//UniqueNCCLID:1" in keys) == swept, keys
    assert not any(k.endswith("UniqueNCCLID:0") for k in keys)  # another root's: that rank deletes its own


def test_trend_slope_and_interval_follow_least_squares():
    rng = random.Random(1)
    t = Trend()
    for x in range(0, 2000, 10):
        t.add(x, 5.0 * x + 1e6 + rng.gauss(0, 50))
    lo, hi = t.interval()
    assert lo < 5.0 < hi and hi - lo < 0.2 and abs(t.slope() - 5.0) < 0.1
    again = Trend.from_state(json.loads(json.dumps(t.state())))
    assert again.slope() == t.slope()
    flat = Trend()
    for x in range(50):
        flat.add(x, 7.0)
    assert flat.slope() == 0.0 and flat.interval() == (0.0, 0.0)


def test_quantiles_are_exact_while_small_and_within_one_percent_beyond():
    rng = random.Random(2)
    xs = [rng.lognormvariate(0, 1) for _ in range(EXACT_CAP)]
    q = Quantiles()
    for x in xs:
        q.add(x)
    assert q.quantile(0.99) == percentile(xs, 0.99)
    more = xs + [rng.lognormvariate(0, 1) for _ in range(20000)]
    for x in more[EXACT_CAP:]:
        q.add(x)
    for p in (0.5, 0.99):
        assert abs(q.quantile(p) / percentile(more, p) - 1) < 0.011
    assert q.n == len(more) and q.max == max(more)


def test_leak_watch_needs_the_floor_and_a_clear_interval():
    w = LeakWatch(warmup=100)
    rng = random.Random(3)
    for x in range(0, 3000, 50):
        w.add(0, x, {"rss_bytes": 1e8 + rng.gauss(0, 4e5) + 30 * x, "fds": 40})  # 30 B per init: under the floor
        w.add(1, x, {"rss_bytes": 1e8 + rng.gauss(0, 4e5) + 4096 * x, "fds": 40 + x // 100})  # 30 fds more
    verdicts = {(f["rank"], f["resource"]): f["verdict"] for f in w.findings()}
    assert verdicts == {(0, "rss_bytes"): "ok", (0, "fds"): "ok", (1, "rss_bytes"): "LEAK", (1, "fds"): "LEAK"}
    for lib in ("gloo", "nccl"):  # the library's own growth, measured without our code, cited
        assert floor_of("rss_bytes", lib).per_1000 > floor_of("rss_bytes", None).per_1000
        assert "results/" in floor_of("rss_bytes", lib).why
    lines = w.leak_lines(w.findings())
    assert any("rss_bytes on rank 1 grows 4." in line and "KiB per init" in line for line in lines), lines


def test_a_resumed_run_is_judged_on_one_process_not_across_two():
    # a leak of 4 KiB per init in the first process; the resumed process starts 200 MB lower: one line
    # through both would fall. Each process is its own stretch (told by pid), the longest is judged.
    w = LeakWatch(warmup=100)
    for x in range(0, 6000, 50):
        w.add(0, x, {"rss_bytes": 3e8 + 4096 * x, "pid": 11})
    for x in range(6000, 8000, 50):
        w.add(0, x, {"rss_bytes": 1e8 + 4096 * (x - 6000), "pid": 12})
    f = w.findings()[0]
    assert f["verdict"] == "LEAK" and f["segments"] == 2 and f["to_round"] < 6000
    assert abs(f["per_init"] - 4096) < 50
    assert "resumed" in w.summary_line(w.findings())
    # flat in both processes, a step between them: no leak (one line through both would see one)
    w = LeakWatch(warmup=100)
    for x in range(0, 4000, 50):
        w.add(0, x, {"rss_bytes": 1e8 if x < 2000 else 3e8, "pid": 1 if x < 2000 else 2})
    assert w.findings()[0]["verdict"] == "ok"


def test_history_remembers_a_bounded_number_of_rounds():
    h = History(keep=8)
    for r in range(100):
        h.add("scoped", r, [RankRecord(0, evidence={"published_root": 0, "published": f"fp{r}"})])
    assert len(h.by_fp) == 8 and h.origin("fp99", "scoped") == "round 99"
    assert "last 8 rounds" in h.origin("fp0", "scoped")


def test_done_rounds_travel_as_ranges():
    done = bytearray(10)
    done[0:3] = b"\x01\x01\x01"
    done[7] = 1
    assert ranges(done) == [[0, 3], [7, 8]] and ranges(bytearray(4)) == []


def test_the_sweeper_deletes_a_round_only_once_every_rank_is_done_with_it():
    class Store:
        def __init__(self):
            self.deleted = []

        def delete_key(self, k):
            self.deleted.append(k)
    store = Store()
    s = Sweeper(store, depth=2)
    rec = RankRecord(0, evidence={"published_root": 0, "keys": ["5:UniqueNCCLID:0"], "namespace": "stress"})
    s.add(5, own_keys(5, 0, rec, behind=True, check_ids=False, held=False))
    s.started(8)
    assert not store.deleted  # 8 - 2 - 2 = 4 < 5
    s.started(9)
    assert "stress/5/rec/0" in store.deleted and "stress/5:UniqueNCCLID:0" in store.deleted
    stock = RankRecord(0, evidence={"published_root": 0, "keys": ["UniqueNCCLID:0"], "namespace": "stress"})
    assert not any("UniqueNCCLID" in k for k in own_keys(6, 0, stock, True, False, False))


def test_leak_injection_parses_its_size():
    assert Injection.parse("leak@3:1=2M").bytes == 2 << 20 and str(Injection.parse("leak@3:1=2M")) == "leak@3:1=2097152"


def test_a_sample_reads_this_process():
    s = resources.sample()
    assert s["rss_bytes"] > 1e6 and s["fds"] > 0 and s["threads"] >= 1 and s["gpu_bytes"] is None


@pytest.mark.parametrize("args, needle", [
    (["--leak-every", "-1"], "--leak-every must be >= 0"),
    (["--leak-every", "0", "--fail-on-leak"], "--fail-on-leak needs the leak watch"),
    (["--inject", "crash=4K"], "only leak takes =SIZE"),
])
def test_bad_leak_options_are_one_line(args, needle):
    from helpers import one_line_error
    assert needle in one_line_error(run(["-m", "stress", "--backend", "gloo", "--rounds", "2", *args]))
