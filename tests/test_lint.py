"""The house's linter, as CI runs it: ruff with the rules and line length pyproject.toml writes down, 0 findings."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from helpers import REPO


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is not installed: bin/setup installs it with the test tools"
    got = subprocess.run([ruff, "check", "--no-cache", "nccl_bench", "stress", "tests", "benchmarks"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stdout[-4000:] + got.stderr[-2000:]
