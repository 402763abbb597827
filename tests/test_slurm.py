"""Under a real Slurm (issue 71): slurmctld and a slurmd per node, each node a network namespace whose Slurm name
does not resolve (tests/slurm.py). Commands run under srun as they are, with no MASTER_ADDR, in
tests/test_multinode.py (stress, bench, resume and locate across nodes: the job store's address from Slurm); here,
a store host that resolves nowhere is said in one line at once."""
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


def test_a_store_host_that_does_not_resolve_is_one_line_at_once(tmp_path):
    """MASTER_ADDR naming no host: each rank says so in one line and the step ends with exit 2, well within
    --timeout (no silent wait)."""
    with netns.Nodes(2) as nodes, slurm.Slurm(nodes) as s:
        t0 = time.monotonic()
        code, out, err = srun(s, ["-N2", "--ntasks-per-node", "1", PY, "-m", "stress", "--backend", "gloo",
                                  "--rounds", "2", "--timeout", "20", "--journal", str(tmp_path / "j.jsonl")],
                              env={"MASTER_ADDR": "no-such-node.invalid"})
        took = time.monotonic() - t0
    lines = {x for x in err.splitlines() if x.strip() and not x.startswith("srun:")}
    assert code == 2 and len(lines) == 1, (code, out, err)
    assert "the job store's host 'no-such-node.invalid' does not resolve" in lines.pop()
    assert took < 15, f"{took:.1f} s"
