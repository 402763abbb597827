"""asv's plugin (asv.conf.json "plugins": [".nccl_bench.asv.plugin"]).

- `asv run` names the machine after its hardware (`asv_machine_name`: its GPUs' model and count, 'h200x2',
  or without GPUs its CPU's, 'cpu-intel-xeonx2'), so that one history never spans two kinds of hardware;
  registers it without asking questions, records its results for the checked-out commit (asv saves nothing
  from an existing environment without --set-commit-hash), and stamps the result with the torch, NCCL and
  driver versions it measured.
- `asv publish` writes a dashboard that needs no network (nccl_bench.asv.offline).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path


def setup() -> None:
    """asv's plugin hook: wraps `asv run` and `asv publish`."""
    from asv.commands.publish import Publish
    from asv.commands.run import Run
    run, publish = Run.run_from_conf_args.__func__, Publish.run.__func__

    def run_from_conf_args(cls, conf, args, **kwargs):
        apply_run_defaults(conf, args)
        done = run(cls, conf, args, **kwargs)
        if getattr(args, "set_commit_hash", None) and getattr(args, "machine", None):
            stamp_versions(conf.results_dir, args.machine, args.set_commit_hash)
        return done

    def publish_offline(cls, conf, *args, **kwargs):
        done = publish(cls, conf, *args, **kwargs)
        from asv.console import log
        from nccl_bench.asv.offline import localize
        left = localize(conf.html_dir)
        log.info(f"nccl-bench: {conf.html_dir} serves the dashboard's scripts itself (vendor/), no network needed"
                 + (f"; still loaded from the network: {', '.join(left)}" if left else ""))
        return done

    Run.run_from_conf_args = classmethod(run_from_conf_args)
    Publish.run = classmethod(publish_offline)


def apply_run_defaults(conf, args) -> None:
    """--machine <GPU model x count> (registered with asv's defaults), --set-commit-hash HEAD."""
    if getattr(args, "machine", None) is None:
        args.machine = register_machine()
    wants_save = getattr(args, "set_commit_hash", None) is None and not getattr(args, "dry_run", False)
    if conf.environment_type == "existing" and wants_save and getattr(args, "range", None) is None:
        head = git_head(conf.repo)  # asv runs from the config's folder; repo is "." there
        if head:  # not a git checkout: asv runs and saves nothing, as it would anyway
            args.set_commit_hash = head


VERSIONS_KEY = "nccl_bench_versions"  # asv reads its own keys and leaves others alone


def stamp_versions(results_dir: str, machine: str, commit: str) -> None:
    """Write torch, NCCL and driver versions into this commit's result files: asv records the machine
    but not the libraries it measured, and `report` shows them beside the history."""
    from nccl_bench.core.sysinfo import versions
    paths = sorted((Path(results_dir) / machine).glob(f"{commit[:8]}-*.json"))
    if not paths:
        return
    stamp = versions()
    for path in paths:
        doc = json.loads(path.read_text())
        doc[VERSIONS_KEY] = stamp
        path.write_text(json.dumps(doc, indent=None, separators=(",", ":")))


def cpu_slug(model: str) -> str:
    """'Intel(R) Xeon(R) Processor' -> 'intel-xeon'; 'AMD EPYC 7763 64-Core Processor' -> 'amd-epyc-7763-64-core'."""
    model = re.sub(r"\((r|tm)\)|\bprocessor\b|\bcpu\b|@.*$", " ", model.lower())
    return re.sub(r"[^a-z0-9]+", "-", model).strip("-") or "unknown"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        return ""


def asv_machine_name() -> str:
    from nccl_bench.core.sysinfo import machine_name
    name = machine_name()
    return name if name != "cpu" else f"cpu-{cpu_slug(cpu_model())}x{os.cpu_count() or 1}"


def register_machine(path: str | None = None) -> str:
    """This machine's asv name (asv_machine_name); adds it to ~/.asv-machine.json if new."""
    from asv.machine import Machine as AsvMachine, MachineCollection
    name = asv_machine_name()
    try:
        MachineCollection.load(name, _path=path)
    except Exception:  # asv's UserError: not known yet
        MachineCollection.save(name, {**AsvMachine.get_defaults(), "machine": name}, _path=path)
    return name


def git_head(where: str = ".") -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and sha else None
