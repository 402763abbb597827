"""`pip install .` gives the `nccl-bench` and `nccl-stress` commands.

The wheel is built from this checkout and installed into a fresh venv without its dependencies
(torch is gigabytes; `--help` needs none of them), so the test checks what the package itself
declares: the console scripts and the modules they start.
"""
from __future__ import annotations

import shutil
import subprocess
import sys

from helpers import REPO


def sh(args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=240, **kw)


def test_pip_install_gives_both_commands(tmp_path):
    src = tmp_path / "src"  # a copy: building writes build/ and *.egg-info beside the sources
    for tree in ("nccl_bench", "stress"):
        shutil.copytree(REPO / tree, src / tree, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    built = sh([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                str(tmp_path / "dist"), str(src)])
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("nccl_bench-*.whl"))
    venv = tmp_path / "venv"  # without pip of its own (ensurepip takes seconds): this pip installs into it
    assert sh([sys.executable, "-m", "venv", "--without-pip", str(venv)]).returncode == 0
    got = sh([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps",
              "--no-index", str(wheel)])
    assert got.returncode == 0, got.stderr[-2000:]
    bench = sh([str(venv / "bin" / "nccl-bench"), "--help"], cwd=tmp_path)
    assert bench.returncode == 0 and "usage: nccl-bench COMMAND" in bench.stdout, bench.stdout + bench.stderr
    assert "replay" in bench.stdout or "report" in bench.stdout
    version = sh([str(venv / "bin" / "nccl-bench"), "--version"], cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("nccl-bench 0."), version.stdout + version.stderr
    stress = sh([str(venv / "bin" / "nccl-stress"), "--help"], cwd=tmp_path)
    assert stress.returncode == 0 and "--rounds" in stress.stdout, stress.stdout + stress.stderr
    assert stress.stdout.startswith("usage: nccl-stress "), stress.stdout[:200]  # as the user called it
    replay = sh([str(venv / "bin" / "nccl-bench"), "replay", "--help"], cwd=tmp_path)
    assert replay.stdout.startswith("usage: nccl-bench replay "), replay.stdout[:200]
    # the dashboard's vendored scripts are package data: the installed package serves them too
    files = sh([str(venv / "bin" / "python"), "-c", "import nccl_bench.asv.offline as o; "
                "print(all((o.WWW / 'vendor' / f['dest']).is_file() for f in o.files()))"], cwd=tmp_path)
    assert files.stdout.strip() == "True", files.stdout + files.stderr
