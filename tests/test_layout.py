"""The house by layer: no upward import, no module past one idea's size, and a run's default
outputs land where git ignores them (a clone stays clean after the README's main job)."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from helpers import REPO, run
from nccl_bench.core import results

LAYERS = {"core": 0, "comm": 1, "job": 2, "engine": 3, "health": 4, "report": 4, "commands": 5}
MAX_LINES = 350


def imported(tree: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module:
            out.add(n.module)
            if n.module == "nccl_bench":
                out |= {f"nccl_bench.{a.name}" for a in n.names}
        elif isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
    return out


def test_every_module_sits_in_a_layer_folder_and_imports_only_below_it():
    bad = []
    for f in sorted((REPO / "nccl_bench").rglob("*.py")):
        parts = f.relative_to(REPO / "nccl_bench").parts
        if len(parts) == 1:
            assert parts[0] in ("__init__.py", "__main__.py"), f"{f.name}: a module outside the layer folders"
            continue
        me = parts[0]
        assert me in LAYERS, f"nccl_bench/{me}/ is not a layer"
        for mod in imported(ast.parse(f.read_text())):
            p = mod.split(".")
            if p[0] == "stress":
                bad.append(f"{f}: imports {mod} (stress/ sits above nccl_bench)")
            elif p[0] == "nccl_bench" and len(p) > 1 and p[1] in LAYERS and p[1] != me \
                    and LAYERS[p[1]] >= LAYERS[me]:
                bad.append(f"{f}: {me} imports {mod}")
    assert not bad, "\n".join(bad)


def test_every_layer_says_what_it_holds_and_no_module_outgrows_one_idea():
    for folder in LAYERS:
        init = REPO / "nccl_bench" / folder / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init}: no docstring"
    big = {str(f.relative_to(REPO)): n for top in ("nccl_bench", "stress") for f in (REPO / top).rglob("*.py")
           if (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_default_outputs_are_under_results_runs_and_ignored_by_git():
    from nccl_bench.job.logs import stem_for
    from stress.journal import default_path as journal_path
    paths = [results.default_path("bench"), journal_path(), stem_for(None, "smoke").with_suffix(".rank0.log")]
    for p in paths:
        assert p.parent.is_relative_to(results.RUNS), p
    if shutil.which("git") and (REPO / ".git").exists():
        rel = [str(p.relative_to(REPO)) for p in paths]
        proc = subprocess.run(["git", "check-ignore", *rel], cwd=REPO, capture_output=True, text=True)
        assert sorted(proc.stdout.split()) == sorted(rel), proc.stdout + proc.stderr


def test_latest_run_is_the_newest_result_file(tmp_path):
    assert results.latest_run(tmp_path) is None
    (tmp_path / "logs").mkdir()
    old, new = tmp_path / "bench-x-1.json", tmp_path / "stress-x-2.jsonl"
    old.write_text("{}")
    new.write_text("")
    os.utime(old, (time.time() - 60,) * 2)
    (tmp_path / "notes.txt").write_text("")
    assert results.latest_run(tmp_path) == new


def copy_of_checkout(dest: Path) -> Path:
    """A fresh repository holding this checkout's files as they are now (committed or not), as a
    clone of the submitted tree would."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "checkout"]):
        subprocess.run(git + cmd, cwd=dest, check=True, capture_output=True, timeout=60)
    return dest


@pytest.mark.skipif(not (REPO / ".git").exists() or not shutil.which("git"), reason="not a git checkout")
def test_main_job_leaves_a_clone_clean(tmp_path):
    """The README's main job (stress, default journal) on a fresh clone: git status stays empty."""
    clone = copy_of_checkout(tmp_path / "clone")
    proc = run(["-m", "stress", "--rounds", "2", "--nranks", "2", "--skew-max", "0"], timeout=120, cwd=clone)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list((clone / "results" / "runs").glob("stress-*.jsonl")), "the journal went somewhere else"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
    assert status == "", status


def test_readme_is_a_front_page_and_every_command_has_its_manual_page():
    import re
    from nccl_bench.commands import COMMANDS
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    assert readme.splitlines()[3:6] == [  # the two first commands, as .ci/run and a newcomer run them
        "bin/setup && .venv/bin/python -m stress --rounds 1000     # the main job: 1000 communicator re-inits under skew",
        "bin/setup && .venv/bin/python -m pytest                   # the tests (what CI runs: .ci/run)", "```"]
    for name in COMMANDS:
        assert (REPO / "docs" / f"{name}.md").is_file(), f"command {name}: no docs/{name}.md"
        assert f"docs/{name}.md" in readme, f"README does not link docs/{name}.md"
    for page in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            if not target.startswith("http"):
                assert (page.parent / target).exists(), f"{page.name}: broken link {target}"
