"""stress's stall guard (stress/stall.py): a rank stuck for good ends itself with one line."""
import subprocess
import sys
import textwrap

from helpers import REPO


def test_a_rank_with_no_round_for_too_long_ends_itself_with_one_line():
    script = textwrap.dedent("""
        import time
        from stress.stall import StallGuard
        with StallGuard(1.0, rank=3) as g:
            g.tick()
            time.sleep(0.4)
            g.tick()          # progress: not a stall
            time.sleep(30)    # a store call that never returns
    """)
    p = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=20)
    assert p.returncode == 1, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rank 3: no round finished for ") and "ends itself" in lines[0]


def test_a_guard_that_is_left_in_time_says_nothing():
    script = "from stress.stall import StallGuard\nwith StallGuard(0.5, rank=0) as g:\n    g.tick()\nprint('ok')"
    p = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=20)
    assert p.returncode == 0 and p.stdout.strip() == "ok" and not p.stderr
