"""commands: the table of entry points, name -> the module whose main(argv) runs it (each in its
feature's room, or stress), imported lazily so that `nccl-bench --help` and a bad option stay fast.
The layer test reads the module names here as imports. May import every other folder; nothing imports it."""
from __future__ import annotations

import importlib

from nccl_bench.core.errors import UsageError

COMMANDS = {
    "info": ("nccl_bench.accept.info", "versions, GPUs, links, launcher, stale-key verdict"),
    "smoke": ("nccl_bench.accept.smoke", "one init + checked all_reduce + destroy per init mode"),
    "init": ("nccl_bench.init.command", "init latency per phase and mode; --simulate-ranks N: ID exchange at scale"),
    "bench": ("nccl_bench.bench.command", "nccl-tests-style busbw sweep of every collective (table + JSON)"),
    "stress": ("stress.command", "churn communicator re-inits under skew; verdicts, diagnosis, journal"),
    "accept": ("nccl_bench.accept.command", "doctor + bandwidth + init + short stress judged by a hardware profile"),
    "doctor": ("nccl_bench.accept.doctor",
               "preflight health on every rank: GPU errors, links, /dev/shm, env, ranks alive"),
    "copies": ("nccl_bench.accept.gpucopies",
               "each GPU's copy bandwidth: device to device (HBM), to and from the host (PCIe)"),
    "locate": ("nccl_bench.locate.command", "name the GPU, link or node that drags collectives down: pairs, bisection"),
    "fleet": ("nccl_bench.fleet.command",
              "which nodes and links stand out, from many nodes' files; `fleet run`: accept a Slurm cluster"),
    "report": ("nccl_bench.report.command",
               "markdown report with plots from result files; --compare: run-to-run ratios"),
    "replay": ("nccl_bench.replay.command", "a job's collectives from its Flight Recorder dumps or profiler trace, "
               "run here and judged against the job"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    head = "usage: nccl-bench COMMAND [options]   (or: python -m nccl_bench COMMAND ...; --version)\n\ncommands:\n"
    return head + "\n".join(f"  {name:{width}}  {help_}" for name, (_, help_) in COMMANDS.items())


def main() -> int:
    """The `nccl-bench` console script, and `python -m nccl_bench` (not in __main__.py: a rank started
    with `-m nccl_bench` from a forked launcher would find that module already imported)."""
    import sys
    from nccl_bench import honour_ctrl_c
    from nccl_bench.core.startmarks import mark
    mark("python")  # Python started and the command's dispatcher imported
    honour_ctrl_c()
    try:  # a Ctrl-C while the job machinery imports is the one line too, not a traceback
        from nccl_bench.job.runner import guarded
    except (KeyboardInterrupt, RuntimeError) as e:
        from nccl_bench import said_stop
        return said_stop(e)
    return guarded(lambda: dispatch(sys.argv[1:]))


def dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    if argv[0] in ("-V", "--version"):
        from nccl_bench import __version__
        from nccl_bench.core.sysinfo import git_sha
        sha = git_sha()
        print(f"nccl-bench {__version__}" + (f" ({sha})" if sha else ""))
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        raise UsageError(f"unknown command '{name}' (choose from {', '.join(COMMANDS)})")
    return importlib.import_module(COMMANDS[name][0]).main(rest)
