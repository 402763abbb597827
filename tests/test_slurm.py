"""Under a real Slurm (issue 71): slurmctld and a slurmd per node, each node a network namespace whose Slurm name
does not resolve (tests/slurm.py). Commands run under srun as they are, with no MASTER_ADDR, in
tests/test_multinode.py (stress, bench, resume, locate and each node's accept: the job store's address from Slurm);
here, bad input under srun: one line from each task at once."""
import subprocess
import sys
import time

import pytest

import netns
import slurm
from helpers import REPO

WHY_NOT = slurm.why_not()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"no Slurm on this machine: {WHY_NOT}")
PY = sys.executable


def srun(s: slurm.Slurm, args: list[str], timeout: float = 120, env: dict | None = None):
    p = s.srun(args, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out, err


def said(err: str) -> set[str]:
    """What the tasks said on stderr (each task its line), srun's own lines left out."""
    return {x for x in err.splitlines() if x.strip() and not x.startswith("srun:")}


def test_bad_input_under_srun_is_one_line_from_each_task_at_once(tmp_path):
    """MASTER_ADDR naming no host: each rank says so in one line and the step ends with exit 2, well within
    --timeout (no silent wait). accept as one task per node with one --json for both nodes: one line before
    anything runs (both would write one file, and all results but one would be lost)."""
    with netns.Nodes(2) as nodes, slurm.Slurm(nodes) as s:
        t0 = time.monotonic()
        code, out, err = srun(s, ["-N2", "--ntasks-per-node", "1", PY, "-m", "stress", "--backend", "gloo",
                                  "--rounds", "2", "--timeout", "20", "--journal", str(tmp_path / "j.jsonl")],
                              env={"MASTER_ADDR": "no-such-node.invalid"})
        took = time.monotonic() - t0
        lines = said(err)
        assert code == 2 and len(lines) == 1, (code, out, err)
        assert "the job store's host 'no-such-node.invalid' does not resolve" in lines.pop()
        assert took < 15, f"{took:.1f} s"
        code, out, err = srun(s, ["-N2", "--ntasks-per-node", "1", PY, "-m", "nccl_bench", "accept", "--backend",
                                  "gloo", "--json", str(tmp_path / "a.json")])
        lines = said(err)
        assert code == 2 and len(lines) == 1 and "the step's 2 nodes would each write it" in lines.pop(), err
        assert not list(tmp_path.glob("a*.json"))
