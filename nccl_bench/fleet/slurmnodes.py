"""The nodes a fleet run accepts, from Slurm itself (sinfo, scontrol): a partition, a node list or the current
allocation; each node's Slurm name, host name and state. A node Slurm has drained, marked down or not responding
is named with Slurm's reason and left out before anything runs. Slurm's tools not here, a controller that does
not answer, a partition or a node Slurm does not know: one line (UsageError), before any step.

Steps are srun calls of one job name per run, so that whatever is left of them when the run stops (Ctrl-C, a
step past its deadline) is cancelled by that name."""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from nccl_bench.core.errors import UsageError

TOOLS = ("srun", "sinfo", "scontrol", "scancel", "squeue")
QUERY_S = 20  # a controller that does not answer a query within this is down, for us
USABLE = {"idle", "mix", "alloc", "comp", "plnd"}  # sinfo's short states a step can run on
UNWELL = set("*~#!%")  # suffixes: not responding, powered off, powering up, pending power down, powering down


@dataclass(frozen=True)
class SlurmNode:
    name: str  # Slurm's NodeName
    host: str  # its NodeHostname: what the node's own results call it
    state: str  # sinfo's short state (%t), with its suffix
    reason: str  # why it is not in service, where Slurm says

    @property
    def usable(self) -> bool:
        return self.state.rstrip("".join(UNWELL) + "$@^-") in USABLE and not set(self.state) & UNWELL

    def said(self) -> str:
        return self.host if self.host == self.name else f"{self.host} (Slurm {self.name})"


def query(argv: list[str], what: str) -> str:
    """A Slurm tool's output; its failure is one line naming what was asked."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=QUERY_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UsageError(f"Slurm did not answer {what} within {QUERY_S} s ({' '.join(argv[:2])}): is slurmctld "
                         "up?") from None
    if p.returncode != 0:
        said = (p.stderr.strip() or p.stdout.strip()).splitlines()
        raise UsageError(f"{what}: {said[0] if said else f'{argv[0]} exit {p.returncode}'}")
    return p.stdout


def check_here() -> None:
    """Slurm's tools on PATH and a controller that answers."""
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        raise UsageError(f"no Slurm here: {', '.join(missing)} not found on PATH (fleet run submits Slurm steps)")
    query(["sinfo", "-h", "-o", "%P"], "no Slurm controller answers here")


def _nodes(args: list[str], what: str) -> list[SlurmNode]:
    out, seen = [], set()
    for line in query(["sinfo", "-h", "-N", "-o", "%N|%n|%t|%E", *args], what).splitlines():
        name, host, state, reason = (line.split("|", 3) + ["", "", ""])[:4]
        if name and name not in seen:  # a node is listed once per partition it is in
            seen.add(name)
            out.append(SlurmNode(name, host or name, state, "" if reason == "none" else reason))
    return out


def select(partition: str | None, nodelist: str | None, env=os.environ) -> tuple[list[SlurmNode], str]:
    """The nodes to accept, sorted by name, and how they were chosen: the node list (within the partition, where
    both are given), else the partition, else the allocation this runs in."""
    where = ["-p", partition] if partition else []
    if partition:
        query(["scontrol", "show", "partition", partition], f"--partition {partition}")
    if nodelist is None and not partition:
        nodelist = env.get("SLURM_JOB_NODELIST")
        if not nodelist:
            raise UsageError("which nodes? give --partition or --nodelist, or run inside an allocation "
                             "(salloc or sbatch)")
        how = f"the allocation of job {env.get('SLURM_JOB_ID', '?')}"
    else:
        how = f"--nodelist {nodelist}" if nodelist else f"--partition {partition}"
    if nodelist is not None:
        names = query(["scontrol", "show", "hostnames", nodelist], f"--nodelist {nodelist}").split()
        known = {n.name: n for n in _nodes(["-n", ",".join(names), *where], f"--nodelist {nodelist}")}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(f"--nodelist {nodelist}: {', '.join(unknown[:5])} "
                             f"{'is not a node' if len(unknown) == 1 else 'are not nodes'} Slurm knows"
                             + (f" in partition {partition}" if partition else ""))
        nodes = [known[n] for n in dict.fromkeys(names)]
    else:
        nodes = _nodes(where, f"--partition {partition}")
        if not nodes:
            raise UsageError(f"--partition {partition}: no nodes in it")
    return sorted(nodes, key=lambda n: n.name), how


def now(nodes: list[SlurmNode], partition: str | None) -> dict[str, SlurmNode]:
    """What Slurm says of these nodes now, by name (one sinfo for the whole partition or list)."""
    names = {n.name for n in nodes}
    where = ["-p", partition] if partition else ["-n", ",".join(sorted(names))]
    try:
        return {n.name: n for n in _nodes(where, "the nodes' state") if n.name in names}
    except UsageError:  # the controller is gone: nothing new can be said of any node
        return {}


def srun(nodes: list[SlurmNode], tasks_per_node: int, job_name: str, partition: str | None, extra: list[str],
         minutes: int) -> list[str]:
    """The srun that runs one step on exactly these nodes; a task that fails ends the step (-K)."""
    return ["srun", f"--nodes={len(nodes)}", f"--ntasks-per-node={tasks_per_node}",
            f"--nodelist={','.join(n.name for n in nodes)}", f"--job-name={job_name}", f"--time={minutes}",
            "--kill-on-bad-exit=1", *(["--partition", partition] if partition else []), *extra]


def cancel(job_name: str, env=os.environ, wait_s: float = 20.0) -> int:
    """Every job or step of this run that is still known to Slurm, cancelled, and waited for until Slurm has let
    them go (cancelling ends them asynchronously: a job shows COMPLETING for Slurm's KillWait), at most `wait_s`.
    Inside an allocation the steps are that job's steps (scancel by their ids); outside, each srun was its own job
    (scancel by name). Nothing is listed only when two answers a second apart say so: a step whose srun was
    starting as the stop came is listed a moment later (one was found RUNNING after a Ctrl-C). Returns how many
    Slurm still lists."""
    import time
    end = time.monotonic() + wait_s
    cancelled: set[str] = set()
    quiet = 0
    while True:
        ours = _ours(job_name, env)
        if ours is None:
            return 0
        quiet = quiet + 1 if not ours else 0
        if quiet >= 2 or (not ours and time.monotonic() > end):
            return 0
        if set(ours) - cancelled:
            try:
                subprocess.run(["scancel", *ours] if env.get("SLURM_JOB_ID") else ["scancel", f"--name={job_name}"],
                               capture_output=True, timeout=QUERY_S)
            except (OSError, subprocess.TimeoutExpired):
                return len(ours)  # the controller is gone: nothing more can be asked of it
            cancelled |= set(ours)
        if ours and time.monotonic() > end:
            return len(ours)
        time.sleep(1.0 if not ours else 0.5)


def _ours(job_name: str, env) -> list[str] | None:
    """The ids of this run's jobs (outside an allocation) or steps (inside one) that Slurm lists; None if it does
    not answer."""
    job = env.get("SLURM_JOB_ID")
    argv = ["squeue", "-h", "-s", "-j", job, "-o", "%i %j"] if job else ["squeue", "-h", "-n", job_name, "-o", "%i %j"]
    try:
        lines = subprocess.run(argv, capture_output=True, text=True, timeout=QUERY_S).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [x.split()[0] for x in lines if x.split()[1:2] == [job_name]]
