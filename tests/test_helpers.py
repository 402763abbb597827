"""The suite's own reaping (tests/helpers.run): a run past its time takes everything it started along, a process
that left its session too, as the reaping of our own launcher does."""
from __future__ import annotations

import subprocess
import time

import pytest

from helpers import run

SPAWNS = """
import os, subprocess, sys, time
left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
kept = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open(sys.argv[1], "w").write(f"{left.pid} {kept.pid}")
time.sleep(120)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_run_past_its_time_leaves_no_process_of_it(tmp_path):
    pids = tmp_path / "pids"
    with pytest.raises(subprocess.TimeoutExpired):
        run(["-c", SPAWNS, str(pids)], timeout=3)
    started = [int(p) for p in pids.read_text().split()]
    end = time.monotonic() + 5
    while any(map(alive, started)) and time.monotonic() < end:
        time.sleep(0.1)
    assert not [p for p in started if alive(p)], started
