"""The command checks of tests/gpu_checks.py under pytest; each is skipped with a reason where the GPUs are
missing. tests/gpu/release.py runs them all, the script checks too, and prints one table."""
import pytest

from gpu_checks import COMMANDS, JUDGES
from helpers import run
from nccl_bench.comm import gpu_count


@pytest.mark.gpu
@pytest.mark.parametrize("check", COMMANDS, ids=[c.name for c in COMMANDS])
def test_gpu_check(check, tmp_path):
    have = gpu_count()
    if have < check.gpus:
        pytest.skip(f"needs {check.gpus} GPU(s), this machine has {have}")
    argv = check.command(tmp_path)
    proc = run(argv, timeout=check.timeout)
    assert proc.returncode == check.exit_code, proc.stderr[-3000:]
    JUDGES[check.expect](check, argv, proc.stdout)


def test_the_release_lists_and_runs_its_checks_on_any_machine(tmp_path):
    """Every check names a judge and a way to run; `release.py --list` lists them; without the GPUs every
    check is skipped with its reason, in the one table."""
    import subprocess
    import sys
    from gpu_checks import CHECKS
    from helpers import REPO
    assert len({c.name for c in CHECKS}) == len(CHECKS)
    for c in CHECKS:
        assert c.expect in JUDGES and bool(c.argv) != bool(c.script), c.name
        assert not c.script or (REPO / "tests" / "gpu" / c.script).is_file(), c.script
    for c in CHECKS:  # every GPU of the machine, unless a check says why not (a 2-GPU pass is no evidence for 4)
        pinned = "--nranks" in c.argv or "CUDA_VISIBLE_DEVICES" in c.env
        assert pinned == bool(c.fewer), f"{c.name}: pins its GPUs without saying why, or says so and does not"
    release = [sys.executable, str(REPO / "tests" / "gpu" / "release.py")]
    listed = subprocess.run([*release, "--list"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and all(c.name in listed.stdout for c in CHECKS), listed.stderr
    bad = subprocess.run([*release, "no-such-check"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    if gpu_count() == 0:
        ran = subprocess.run([*release, "smoke", "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0 and ran.stdout.count("SKIP") >= 4, ran.stdout + ran.stderr
