"""GPU cases from gpu_cases.py; each is skipped with a reason where the GPUs are missing."""
import json

import pytest

from gpu_cases import CASES
from helpers import run
from nccl_bench.comm import gpu_count


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gpu_case(case, tmp_path):
    have = gpu_count()
    if have < case.gpus:
        pytest.skip(f"needs {case.gpus} GPU(s), this machine has {have}")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in case.argv]
    proc = run(argv, timeout=case.timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if case.expect == "stale-round-1-then-ok":
        rounds = [json.loads(l) for l in open(argv[1])]
        ok = [all(e["ok"] for e in r["ranks"]) for r in rounds]
        assert ok == [True, False, True], ok
        failed = rounds[1]["ranks"]
        assert all(e["error"]["kind"] == "hang" for e in failed)
        fps = {tuple(e["evidence"]["fingerprints"]) for e in failed}
        assert len(fps) > 1, "the ranks should disagree on the IDs they used"
