"""Multi-process jobs on gloo: the stale-key race, its proof, deadlines, no orphans."""
import json
import socket
import subprocess

import pytest

import netns

from helpers import REPO, one_line_error, run
from nccl_bench.comm import nvidia_driver


def churn(tmp_path, mode, rounds=12, skew=0.2, timeout=1.2):
    out = tmp_path / f"{mode}.jsonl"
    proc = run(["-m", "churn", str(out), "--modes", ",".join([mode] * rounds), "--skew-max", str(skew),
                "--timeout", str(timeout), "--nranks", "3"],
               timeout=rounds * (timeout + 3) + 60, env={"PYTHONPATH": str(REPO / "tests" / "jobs")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in out.read_text().splitlines()]


def stale_reads(rounds):
    """(round, rank, root) where a rank read a fingerprint its root did not publish that round."""
    found = []
    for rec in rounds:
        ranks = rec["ranks"]
        published = {e["evidence"]["published_root"]: e["evidence"]["published"]
                     for e in ranks if e["evidence"] and e["evidence"]["published_root"] >= 0}
        for e in ranks:
            ev = e["evidence"]
            for root, fp in enumerate(ev["fingerprints"] if ev else []):
                if root in published and fp != published[root]:
                    found.append((rec["round"], e["rank"], root))
    return found


def test_stock_reads_stale_ids_and_fingerprints_prove_it(tmp_path):
    rounds = churn(tmp_path, "stock", rounds=8)  # the first stale read comes within 3 rounds (test_stress_jobs)
    assert len(rounds) == 8
    stale = stale_reads(rounds)
    assert stale, "stock with skew should read a previous round's ID"
    failed = [e for rec in rounds for e in rec["ranks"] if not e["ok"]]
    assert failed
    # every failed init ended within its deadline (1.2 s) plus scheduling slack
    assert max(e["elapsed"] for e in failed) < 1.2 + 1.5
    # each stale round is a failed round: mismatched IDs never meet
    assert {r for r, _, _ in stale} <= {rec["round"] for rec in rounds if not all(e["ok"] for e in rec["ranks"])}


@pytest.mark.parametrize("mode", ["scoped", "regular"])
def test_scoped_and_regular_never_stale(tmp_path, mode):
    rounds = churn(tmp_path, mode)
    assert len(rounds) == 12
    assert stale_reads(rounds) == []
    assert all(e["ok"] for rec in rounds for e in rec["ranks"])


def test_smoke_all_modes_gloo():
    proc = run(["-m", "nccl_bench", "smoke", "--backend", "gloo", "--nranks", "3", "--ranks-per-root", "1"])
    assert proc.returncode == 0, proc.stderr
    for mode in ("regular", "stock", "scoped"):
        assert f"{mode}" in proc.stdout and "ok" in proc.stdout


# Where nodes can be made, tests/test_multinode.py runs torchrun agents on them; only elsewhere does this run
# them on one host (defined there alone, so that a run with nodes shows no skip for it).
if netns.why_not() is not None:
    def test_multinode_torchrun_two_agents():
        """Two torchrun agents (--nnodes 2) on one machine run smoke across both 'nodes'."""
        import os
        import subprocess
        import sys
        import uuid
        from helpers import REPO, TOKEN_VAR, assert_no_survivors
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        token = uuid.uuid4().hex
        env = {**os.environ, TOKEN_VAR: token, "OMP_NUM_THREADS": "1"}
        procs = [subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
             "--node-rank", str(n), "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
             "--rdzv-id", token, "--local-addr", "127.0.0.1", "--max-restarts", "0",
             "-m", "nccl_bench", "smoke", "--backend", "gloo"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
            for n in (0, 1)]
        outs = [p.communicate(timeout=180) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        text = "".join(o for o, _ in outs)
        assert "smoke gloo x2 regular" in text and "FAIL" not in text
        assert_no_survivors(token)


@pytest.mark.parametrize("args,needle", [
    (["--init", "bogus"], "unknown init mode"),
    (["--backend", "mpi"], "unknown backend"),
    (["--ranks-per-root", "0"], "ranks-per-root"),
    (["--backend", "nccl"], "needs a GPU"),
    (["--timeout", "0"], "timeout"),
    (["--nranks", "x"], "invalid int"),
])
def test_bad_input_one_line_exit_2(args, needle):
    err = one_line_error(run(["-m", "nccl_bench", "smoke", *args]))
    assert needle in err


@pytest.mark.skipif(nvidia_driver(), reason="with an NVIDIA driver the option defaults ask torch for the GPU count")
@pytest.mark.parametrize("args,needle", [
    (["-m", "nccl_bench", "bench", "-n", "0"], "-n/--iters"),
    (["-m", "nccl_bench", "bench", "-d", "foo"], "-d/--datatype"),
    (["-m", "nccl_bench", "bench", "-a", "7"], "-a/--average"),  # the sweep plan's check
    (["-m", "nccl_bench", "init", "--rounds", "0"], "--rounds"),
    (["-m", "nccl_bench", "init", "--simulate-ranks", "0"], "--simulate-ranks"),
    (["-m", "nccl_bench", "smoke", "--nranks", "0"], "--nranks"),
    (["-m", "stress", "--collective", "gather"], "--collective"),
    (["-m", "nccl_bench", "stress", "--inject", "crash@9", "--rounds", "3"], "beyond --rounds"),
])
def test_bad_input_is_answered_before_torch_loads(args, needle):
    """Entry points parse and check options without torch (seconds of CPU): only a job loads it."""
    proc = run(["-X", "importtime", *args], timeout=60)
    lines = proc.stderr.splitlines()
    loaded = [line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")]
    assert not [m for m in loaded if m.split(".")[0] == "torch"], "torch was imported"
    said = "\n".join(line for line in lines if not line.startswith("import time:"))
    assert needle in one_line_error(subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout, said))


def test_unreachable_master_is_exit_2():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once we leave: nobody listens there
    proc = run(["-m", "nccl_bench", "smoke", "--backend", "gloo"], timeout=60,
               env={"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                    "NCCL_BENCH_STORE_TIMEOUT": "3"})
    err = one_line_error(proc)
    assert "cannot reach" in err


def test_unknown_command():
    assert "unknown command" in one_line_error(run(["-m", "nccl_bench", "frobnicate"]))
