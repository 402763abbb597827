"""The house by feature: shared layers, a room per feature that never imports another, no import back up,
no module or function past one idea's size, comments that say why, and a run's default outputs where git
ignores them (a clone stays clean after the README's main job)."""
from __future__ import annotations

import ast
import io
import os
import re
import shutil
import subprocess
import time
import tokenize
from pathlib import Path

import pytest

from helpers import REPO, run
from nccl_bench.core import results

# The house: shared layers (each imports only those below it), then stress (a top-level package built on
# the layers), then the features (each one room, never importing another), then the table of commands.
LAYERS = {"core": 0, "records": 1, "comm": 2, "job": 3, "measure": 4}
FEATURES = ("bench", "init", "accept", "locate", "fleet", "replay", "report", "asv")
LEVEL = {**LAYERS, "stress": 5, **{f: 6 for f in FEATURES}, "commands": 7}
MAX_LINES = 350
MAX_FUNCTION_LINES = 60
PRODUCT = ("nccl_bench", "stress", "benchmarks")
# names two folders may share because they are one concept in each: a feature's command, its options,
# its ranks' side
SHARED_NAMES = {"__init__", "__main__", "command", "options", "worker"}
MODULE_NAME = re.compile(r"^(nccl_bench|stress)(\.\w+)+$")  # a module named in a string: importlib, -m


def product_files(tops=PRODUCT):
    return sorted(f for top in tops for f in (REPO / top).rglob("*.py"))


def imported(tree: ast.AST) -> set[str]:
    """Every module a file depends on: its imports (at any depth), and module names it hands to importlib
    or `python -m` as strings."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module:
            out.add(n.module)
            out |= {f"{n.module}.{a.name}" for a in n.names}
        elif isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and MODULE_NAME.match(n.value):
            out.add(n.value)
    return out


def room(module: str) -> str | None:
    """The room a module lives in: a layer, a feature, stress or commands; None for nccl_bench itself."""
    parts = module.split(".")
    if parts[0] == "stress":
        return "stress"
    if parts[0] == "nccl_bench" and len(parts) > 1 and parts[1] in LEVEL:
        return parts[1]
    return None


def test_every_module_sits_in_a_room_and_imports_only_down_and_never_another_feature():
    bad = []
    for f in product_files(("nccl_bench", "stress")):
        rel = f.relative_to(REPO)
        if rel.parts[0] == "nccl_bench" and len(rel.parts) == 2:
            assert rel.name in ("__init__.py", "__main__.py"), f"{rel}: a module outside the rooms"
            continue
        me = room(".".join(rel.with_suffix("").parts))
        assert me is not None, f"{rel.parent}/ is neither a shared layer nor a feature"
        for mod in imported(ast.parse(f.read_text())):
            other = room(mod)
            if other is None or other == me:
                continue
            if me in FEATURES and other in FEATURES:
                bad.append(f"{rel}: feature {me} imports feature {mod}")
            elif LEVEL[other] >= LEVEL[me]:
                bad.append(f"{rel}: {me} imports {mod} (a layer above it)")
    assert not bad, "\n".join(bad)


def test_no_circle_among_module_level_imports():
    graph = {}
    for f in product_files(("nccl_bench", "stress")):
        name = ".".join(f.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(f.read_text())
        deps = set()
        for n in tree.body:  # module level only: an import inside a function runs when it is called
            if isinstance(n, ast.ImportFrom) and n.module:
                deps |= {n.module, *(f"{n.module}.{a.name}" for a in n.names)}
            elif isinstance(n, ast.Import):
                deps |= {a.name for a in n.names}
        graph[name] = deps
    graph = {k: {d for d in v if d in graph and d != k} for k, v in graph.items()}
    seen, stack, circles = set(), [], []

    def visit(node):
        if node in stack:
            circles.append(stack[stack.index(node):] + [node])
            return
        if node in seen:
            return
        seen.add(node)
        stack.append(node)
        for d in sorted(graph[node]):
            visit(d)
        stack.pop()
    for node in sorted(graph):
        visit(node)
    assert not circles, circles[:3]


def test_every_room_says_what_it_holds_and_no_module_outgrows_one_idea():
    for folder in [*LAYERS, *FEATURES, "commands"]:
        init = REPO / "nccl_bench" / folder / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init}: no docstring"
    big = {str(f.relative_to(REPO)): n for f in product_files() if (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_no_function_outgrows_its_phases():
    long = []
    for f in product_files():
        for n in ast.walk(ast.parse(f.read_text())):
            function = isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            if function and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES:
                long.append(f"{f.relative_to(REPO)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)")
    assert not long, "functions over 60 lines:\n" + "\n".join(long)


def test_no_two_modules_share_a_name_unless_one_concept():
    where: dict[str, list[str]] = {}
    for f in product_files(("nccl_bench", "stress")):
        where.setdefault(f.stem, []).append(str(f.relative_to(REPO)))
    twice = {k: v for k, v in where.items() if len(v) > 1 and k not in SHARED_NAMES}
    assert not twice, twice


MACHINE = re.compile(r"\b(?:[ABH]\d00|GH200|DGX)\b|\b[abh]\d00x\d\b", re.I)
FIGURE = re.compile(r"(?<![\w.])\d[\d.,]*\s?(?:us|µs|ms|ns|s|GB/s|GiB|MiB|GB|MB|%|x|MHz)(?![A-Za-z0-9])")


def comment_lines(source: str):
    """(line, text) of every comment and docstring line."""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(n, clean=False)
            if doc:
                for k, line in enumerate(doc.splitlines()):
                    yield n.body[0].lineno + k, line


def test_comments_say_why_and_measurements_live_in_the_docs():
    """A figure measured on a machine belongs in docs/validation.md or a results README, not in a comment."""
    notes = [f"{f.relative_to(REPO)}:{line}: {text.strip()}" for f in product_files()
             for line, text in comment_lines(f.read_text()) if MACHINE.search(text) and FIGURE.search(text)]
    assert not notes, "lab notes in code:\n" + "\n".join(notes)


def test_every_broad_except_is_narrowed_or_says_why_it_may_swallow():
    silent = []
    for f in product_files():
        lines = f.read_text().splitlines()
        for n in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(n, ast.ExceptHandler) or n.type is None:
                broad = isinstance(n, ast.ExceptHandler)
            else:
                names = [e.id for e in (n.type.elts if isinstance(n.type, ast.Tuple) else [n.type])
                         if isinstance(e, ast.Name)]
                broad = bool({"Exception", "BaseException"} & set(names))
            if broad:  # a comment on the except line, or before or on the first line of its body
                said = any("#" in line for line in lines[n.lineno - 1:n.body[0].lineno])
                if not said:
                    silent.append(f"{f.relative_to(REPO)}:{n.lineno}")
    assert not silent, "broad excepts that do not say why:\n" + "\n".join(silent)


def test_the_package_reads_nothing_from_tests():
    """What the package needs at run time (anchors, profiles, the dashboard's files) ships inside it."""
    readers = [f"{f.relative_to(REPO)}" for f in product_files(("nccl_bench", "stress"))
               if re.search(r"REPO\s*/\s*[\"']tests[\"']|[\"']tests/", f.read_text())]
    assert not readers, readers


def test_cuda_is_reached_through_one_module_on_nvidias_bindings():
    """CUDA's driver and NVRTC are core/cudadriver.py's, through cuda.bindings: every other module asks it (a
    count, an address, a Gpu, a compiled module), and none opens libcuda or libnvrtc by hand."""
    texts = {f"{f.relative_to(REPO)}": f.read_text() for f in product_files(("nccl_bench", "stress"))}
    bindings = [name for name, text in texts.items() if re.search(r"^\s*(from|import) cuda\b", text, re.M)]
    by_hand = [name for name, text in texts.items()
               if re.search(r"libcuda\.so|libnvrtc", text) and re.search(r"CDLL\(|dlopen", text)]
    assert bindings == ["nccl_bench/core/cudadriver.py"], bindings
    assert not by_hand, by_hand


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
        "bin/setup && .venv/bin/python -m stress --rounds 1000     "
        "# the main job: 1000 communicator re-inits under skew",
        "bin/setup && .venv/bin/python -m pytest                   # the tests (what CI runs: .ci/run)", "```"]
    for name in COMMANDS:
        assert (REPO / "docs" / f"{name}.md").is_file(), f"command {name}: no docs/{name}.md"
        assert f"docs/{name}.md" in readme, f"README does not link docs/{name}.md"
    for page in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            if not target.startswith("http"):
                assert (page.parent / target).exists(), f"{page.name}: broken link {target}"
