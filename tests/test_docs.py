"""The manual as a new user reads it: every command line the README and docs/ show names a command that
exists and only options its --help lists, and the README's command table is the command table."""
from __future__ import annotations

import re
import subprocess
import sys
from functools import cache

from helpers import REPO
from nccl_bench.commands import COMMANDS

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
OURS = re.compile(r"^\s*(?:[A-Z_]+=\S+\s+)*(nccl-bench|nccl-stress|python3? -m nccl_bench|python3? -m stress)\b(.*)$")


@cache
def help_of(command: str) -> str:
    argv = ["-m", "stress", "--help"] if command == "stress" else ["-m", "nccl_bench", *command.split(), "--help"]
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=REPO, timeout=60).stdout


def shown_command_lines():
    """(where, command, its words) for each of our command lines in a shell block of the manual."""
    for doc in DOCS:
        in_block = False
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            if line.startswith("```"):
                in_block = not in_block
                continue
            for part in re.split(r"&&|\|\||\||;", line.split("  #")[0]) if in_block else []:
                if m := OURS.match(part):
                    tool, words = m.group(1), m.group(2).split()
                    if "stress" in tool:
                        yield f"{doc.name}:{n}", "stress", words
                    elif words[:2] == ["fleet", "run"]:  # a command of its own; what follows -- is accept's
                        ours, _, accepts = " ".join(words[2:]).partition(" -- ")
                        yield f"{doc.name}:{n}", "fleet run", ours.split()
                        yield f"{doc.name}:{n}", "accept", accepts.split()
                    elif words:
                        yield f"{doc.name}:{n}", words[0], words[1:]


def test_every_command_line_in_the_manual_names_a_command_and_options_it_has():
    wrong, seen = [], 0
    for where, command, words in shown_command_lines():
        seen += 1
        if command != "stress" and command.split()[0] not in COMMANDS:
            wrong.append(f"{where}: no command '{command}'")
            continue
        usage = help_of(command)
        wrong += [f"{where}: {command} has no {flag}" for flag in (w.split("=")[0] for w in words if w.startswith("--"))
                  if not re.search(rf"{re.escape(flag)}\b", usage)]
    assert seen > 50 and not wrong, "\n".join(wrong)


def test_the_readmes_command_table_is_the_command_table():
    readme = (REPO / "README.md").read_text()
    listed = set(re.findall(r"^\| `nccl-bench (\w+)", readme, re.M))
    listed |= {"stress"} if re.search(r"^\| `nccl-stress ", readme, re.M) else set()  # its own console script
    assert listed == set(COMMANDS), (listed ^ set(COMMANDS))
