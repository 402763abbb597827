"""A real Slurm on one machine (issue 71): Debian's slurm-wlm and munge, slurmctld on the first node and one slurmd
per node, each inside its node's network namespace (tests/netns.py), so that srun, the daemons and the tasks talk
over the nodes' own addresses. Slurm's node names are not the nodes' host names (NodeHostname and NodeAddr say
those), as on clusters whose node names do not resolve. Everything lives in a temporary folder and inside the
namespaces; leaving removes it all.

    with netns.Nodes(2) as nodes, Slurm(nodes) as slurm:
        p = slurm.srun(["-N2", "--ntasks-per-node", "1", sys.executable, "-m", "nccl_bench", ...])

`why_not()` says why there is none here (not root, or slurm-wlm and munge not installed).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import netns

DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "scontrol")
NAME = "nbs{}"  # Slurm's name of node i: not a host name anyone resolves
START_S = 30  # the nodes must be up within this


def why_not() -> str | None:
    if (why := netns.why_not()) is not None:
        return why
    missing = [d for d in DAEMONS if not shutil.which(d)]
    if missing:
        return f"no {', '.join(missing)} here (Debian: apt-get install slurm-wlm munge)"
    return None


def _conf(d: Path, nodes: netns.Nodes, cpus: int) -> str:
    lines = [
        "ClusterName=nbt", f"SlurmctldHost={nodes.host(0)}({nodes.addr(0)})", "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={d}/munge.socket",
        f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool-%n", f"SlurmctldPidFile={d}/slurmctld.pid",
        f"SlurmdPidFile={d}/slurmd-%n.pid", f"SlurmctldLogFile={d}/slurmctld.log", f"SlurmdLogFile={d}/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none", "SwitchType=switch/none",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/builtin", "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
        "ReturnToService=2", "SlurmctldTimeout=30", "SlurmdTimeout=30", "InactiveLimit=0", "KillWait=5",
        "MinJobAge=5", "MailProg=/bin/true",
        "SlurmdParameters=config_overrides",  # nodes of one machine: each says it has the CPUs given here
    ]
    for i in range(nodes.n):
        lines.append(f"NodeName={NAME.format(i)} NodeHostname={nodes.host(i)} NodeAddr={nodes.addr(i)} CPUs={cpus} "
                     "State=UNKNOWN")
    names = ",".join(NAME.format(i) for i in range(nodes.n))
    lines.append(f"PartitionName=nbt Nodes={names} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES")
    return "\n".join(lines) + "\n"


class Slurm:
    """munged, slurmctld and a slurmd per node of `nodes`; srun and scontrol run inside node 0."""

    def __init__(self, nodes: netns.Nodes, cpus: int = 4):
        self.nodes, self.cpus = nodes, cpus
        self.dir = Path(tempfile.mkdtemp(prefix="nbt-slurm-"))
        self.conf = self.dir / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        for k in [k for k in self.env if k.startswith(("SLURM_", "SBATCH_", "SRUN_"))]:
            if k != "SLURM_CONF":
                del self.env[k]
        self.daemons: list[subprocess.Popen] = []

    def __enter__(self) -> "Slurm":
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        d = self.dir
        (d / "state").mkdir()
        for i in range(self.nodes.n):
            (d / f"spool-{NAME.format(i)}").mkdir()
        (d / "munge.key").write_bytes(os.urandom(1024))
        os.chmod(d / "munge.key", 0o400)
        self.conf.write_text(_conf(d, self.nodes, self.cpus))
        log = open(d / "daemons.log", "ab")
        self.daemons.append(subprocess.Popen(
            ["munged", "--foreground", "--force", f"--key-file={d}/munge.key", f"--socket={d}/munge.socket",
             f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed"],
            stdout=log, stderr=log, start_new_session=True))
        self._wait_for(lambda: (d / "munge.socket").exists(), "munged's socket")
        self.daemons.append(self.nodes.start(0, ["slurmctld", "-D", "-i", "-f", str(self.conf)], env=self.env,
                                             stdout=log, stderr=log))
        for i in range(self.nodes.n):
            self.daemons.append(self.nodes.start(i, ["slurmd", "-D", "-N", NAME.format(i), "-f", str(self.conf)],
                                                 env=self.env, stdout=log, stderr=log))
        self._wait_for(self._all_idle, f"{self.nodes.n} idle node(s) in sinfo")

    def _wait_for(self, ready, what: str) -> None:
        end = time.monotonic() + START_S
        while not ready():
            if time.monotonic() > end:
                raise RuntimeError(f"Slurm: no {what} within {START_S} s; logs in {self.dir}:\n{self.logs()}")
            for p in self.daemons:
                if p.poll() is not None:
                    raise RuntimeError(f"Slurm: a daemon ended ({p.args[-3:]}, exit {p.returncode}):\n{self.logs()}")
            time.sleep(0.2)

    def _all_idle(self) -> bool:
        p = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=10)
        states = [line.split()[1] for line in p.stdout.splitlines() if len(line.split()) == 2]
        return len(states) == self.nodes.n and all(s == "idle" for s in states)

    def run(self, argv: list[str], timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
        """A Slurm client command inside node 0, to its end."""
        p = self.nodes.start(0, argv, env={**self.env, **(env or {})}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            return subprocess.CompletedProcess(p.args, -9, out, err)
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def srun(self, args: list[str], env: dict | None = None, **popen) -> subprocess.Popen:
        """`srun ARGS` from node 0, as a user on a login node runs it."""
        return self.nodes.start(0, ["srun", *args], env={**self.env, **(env or {})}, **popen)

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-1500:]}"
                         for p in sorted(self.dir.glob("*.log")))

    def close(self) -> None:
        for p in reversed(self.daemons):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in reversed(self.daemons):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
