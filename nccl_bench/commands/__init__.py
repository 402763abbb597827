"""commands: one module per command (bench, init, accept, doctor, locate, fleet, info, smoke, report, replay) and
the asv suite's logic; each parses its options and delegates. This file is the table of
commands: name -> module with main(argv), imported lazily. May import every other folder;
nothing imports it."""
from __future__ import annotations

import importlib

from nccl_bench.core.errors import UsageError

COMMANDS = {
    "info": ("nccl_bench.commands.info", "versions, GPUs, links, launcher, stale-key verdict"),
    "smoke": ("nccl_bench.commands.smoke", "one init + checked all_reduce + destroy per init mode"),
    "init": ("nccl_bench.commands.initbench", "init latency per phase and mode; --simulate-ranks N: ID exchange at scale"),
    "bench": ("nccl_bench.commands.bench", "nccl-tests-style busbw sweep of every collective (table + JSON)"),
    "stress": ("stress.command", "churn communicator re-inits under skew; verdicts, diagnosis, journal"),
    "accept": ("nccl_bench.commands.accept", "doctor + bandwidth + init + short stress judged by a hardware profile"),
    "doctor": ("nccl_bench.commands.doctor", "preflight health on every rank: GPU errors, links, /dev/shm, env, ranks alive"),
    "locate": ("nccl_bench.commands.locate", "name the GPU, link or node that drags collectives down: pairs, bisection"),
    "fleet": ("nccl_bench.commands.fleet", "which nodes stand out: accept/bench/locate files of many nodes, robust stats"),
    "report": ("nccl_bench.commands.report", "markdown report with plots from result files; --compare: run-to-run ratios"),
    "replay": ("nccl_bench.commands.replay", "a job's collectives from its Flight Recorder dumps or profiler trace, "
               "run here and judged against the job"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    return "usage: nccl-bench COMMAND [options]   (or: python -m nccl_bench COMMAND ...)\n\ncommands:\n" + "\n".join(
        f"  {name:{width}}  {help_}" for name, (_, help_) in COMMANDS.items())


def main() -> int:
    """The `nccl-bench` console script, and `python -m nccl_bench` (not in __main__.py: a rank started
    with `-m nccl_bench` from a forked launcher would find that module already imported)."""
    import sys
    try:  # a Ctrl-C while the job machinery imports is the one line too, not a traceback
        from nccl_bench.job.cli import guarded
    except KeyboardInterrupt:
        from nccl_bench import interrupted
        return interrupted()
    return guarded(lambda: dispatch(sys.argv[1:]))


def dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        raise UsageError(f"unknown command '{name}' (choose from {', '.join(COMMANDS)})")
    return importlib.import_module(COMMANDS[name][0]).main(rest)
