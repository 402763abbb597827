"""Who am I: rank, world size, local rank and master from torchrun, Slurm or MPI.

With no launcher in the environment a command launches itself on this node (nccl_bench.job.launcher),
in torchrun's environment.
Multi-node runs go through torchrun or srun as users already run them.
"""
from __future__ import annotations

import functools
import ipaddress
import os
import re
import socket
from dataclasses import dataclass

from nccl_bench import STORE_FILE_ENV
from nccl_bench.core.errors import UsageError


@dataclass(frozen=True)
class Identity:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int
    launcher: str  # torchrun | slurm | mpi
    host: str  # this rank's node as NCCL tells nodes apart: node_name()
    run_id: str = "local"
    restart: int = 0
    agent_store: bool = False  # the launcher hosts a store at master_addr:master_port
    store_file: str | None = None  # our own launcher: rank 0 writes the job store's address there

    @property
    def single_node(self) -> bool:
        return self.local_world_size == self.world_size and _is_local(self.master_addr)


def _is_local(addr: str) -> bool:
    if addr in ("localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn()):
        return True
    return addr.startswith("127.")


def _int(env, name: str, default: int | None = None) -> int:
    if default is not None and not str(env.get(name, "")).strip():
        return default
    try:
        return int(env[name])
    except (KeyError, ValueError):
        raise UsageError(f"launcher environment: {name}={env.get(name, '')!r} is missing or not an integer") from None


def _port(env, default: int = 29500) -> int:
    port = _int(env, "MASTER_PORT", default)
    if not 1 <= port <= 65535:
        raise UsageError(f"launcher environment: MASTER_PORT={port} is not a TCP port (1..65535)")
    return port


def _addr(env, default: str) -> str:
    """MASTER_ADDR as given; a dotted quad must be an IPv4 address (256.1.1.1 is no host to wait for)."""
    addr = (env.get("MASTER_ADDR") or default).strip()
    if re.fullmatch(r"[0-9.]+", addr):
        try:
            ipaddress.IPv4Address(addr)
        except ValueError:
            raise UsageError(f"launcher environment: MASTER_ADDR={addr!r} is not an IPv4 address") from None
    elif addr and not re.fullmatch(r"[A-Za-z0-9_.:\-\[\]%]+", addr):
        raise UsageError(f"launcher environment: MASTER_ADDR={addr!r} is not a host name or address")
    return addr


MAX_WORLD = 1 << 20  # ranks in one job: beyond the largest clusters NCCL runs on (a million GPUs)


def _checked(ident: "Identity") -> "Identity":
    """Ranks inside their world, before anything waits on them."""
    if not 1 <= ident.world_size <= MAX_WORLD:
        raise UsageError(f"launcher environment: the world size is {ident.world_size}, not 1 to {MAX_WORLD:,} "
                         "(a store, a journal and a diagnosis are sized by it)")
    if not 0 <= ident.rank < ident.world_size:
        raise UsageError(f"launcher environment: rank {ident.rank} is outside a world of {ident.world_size} "
                         f"(ranks 0..{ident.world_size - 1})")
    if ident.local_world_size > 0 and not 0 <= ident.local_rank < ident.local_world_size:
        raise UsageError(f"launcher environment: local rank {ident.local_rank} is outside this node's "
                         f"{ident.local_world_size} rank(s)")
    if ident.local_world_size > ident.world_size:
        raise UsageError(f"launcher environment: {ident.local_world_size} ranks on this node, more than the "
                         f"world's {ident.world_size}")
    return ident


def first_host(nodelist: str) -> str:
    """First host of a Slurm node list such as 'gpu[003-005,009],login1' -> 'gpu003'."""
    m = re.match(r"\s*([^,\[]+)(?:\[([^\]]+)\])?", nodelist or "")
    if not m:
        raise UsageError(f"cannot parse the Slurm node list '{nodelist}'")
    prefix, ranges = m.group(1), m.group(2)
    if not ranges:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def slurm_port(env) -> int:
    """A Slurm step's job store port where MASTER_PORT is not set: one per job and step (steps of one job run side
    by side on a node, fleet's per-node accepts among them), from 20000 to 29999, below Linux's ephemeral ports."""
    job, step = _int(env, "SLURM_JOB_ID", 0), _int(env, "SLURM_STEP_ID", 0)
    return 20000 + (job * 97 + step) % 10000


SCONTROL_S = 10.0  # scontrol's answer about one node


@functools.lru_cache(maxsize=8)
def slurm_node_addr(name: str) -> str:
    """Where Slurm node `name` is reached: the name itself where it resolves, else its NodeAddr as Slurm's own
    scontrol says (a cluster's node names need not be host names). One line and exit 2 where neither answers."""
    try:
        socket.getaddrinfo(name, None)
        return name
    except (socket.gaierror, UnicodeError):
        pass
    import subprocess
    try:
        p = subprocess.run(["scontrol", "show", "node", name, "-o"], capture_output=True, text=True,
                           timeout=SCONTROL_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"the Slurm step's first node {name!r} does not resolve and scontrol could not say its "
                         f"address ({type(e).__name__}); set MASTER_ADDR to it") from None
    m = re.search(r"\bNodeAddr=(\S+)", p.stdout)
    if p.returncode != 0 or not m:
        why = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no NodeAddr"]
        raise UsageError(f"the Slurm step's first node {name!r} does not resolve and scontrol says: {why[0][:200]}; "
                         "set MASTER_ADDR to it")
    return m.group(1)


HOSTID_ENV = "NCCL_HOSTID"  # NCCL's own override of its host identity: ranks with different ids are other hosts


def node_name(env=None) -> str:
    """This process's node as NCCL tells nodes apart: the hostname, and NCCL_HOSTID where it is set
    ('gpu7:a'): two agents on one machine with their own NCCL_HOSTID talk over NCCL's network
    transport, as two nodes do."""
    env = os.environ if env is None else env
    host, hostid = socket.gethostname(), env.get(HOSTID_ENV, "").strip()
    return f"{host}:{hostid}" if hostid and hostid != host else host


def launcher_node(env=None) -> str | None:
    """Which node the launcher says this process is on (torchrun's GROUP_RANK, Slurm's SLURM_NODEID),
    or None where it does not say."""
    env = os.environ if env is None else env
    for name in ("GROUP_RANK", "SLURM_NODEID"):
        if env.get(name, "").strip():
            return f"{name}={env[name].strip()}"
    return None


def detect(env=None) -> Identity | None:
    """The launcher's view of this process, or None when no launcher started it."""
    env = os.environ if env is None else env
    host = node_name(env)
    if "RANK" in env and "WORLD_SIZE" in env:  # torchrun, our self-launch, or plain env://
        world = _int(env, "WORLD_SIZE")
        return _checked(Identity(
            rank=_int(env, "RANK"), world_size=world, local_rank=_int(env, "LOCAL_RANK", 0),
            local_world_size=_int(env, "LOCAL_WORLD_SIZE", world), master_addr=_addr(env, "127.0.0.1"),
            master_port=_port(env), launcher="torchrun", host=host, run_id=env.get("TORCHELASTIC_RUN_ID", "env"),
            restart=_int(env, "TORCHELASTIC_RESTART_COUNT", 0),
            agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true",
            store_file=env.get(STORE_FILE_ENV) or None))
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env and "SLURM_STEP_ID" in env:
        ntasks = _int(env, "SLURM_NTASKS")
        nnodes = _int(env, "SLURM_STEP_NUM_NODES", _int(env, "SLURM_NNODES", 1))
        # rank 0 runs on the step's first node (Slurm's block distribution, its default); where MASTER_ADDR is not
        # given, that node's address is the store's, from Slurm itself
        master = _addr(env, "") or (slurm_node_addr(first_host(env.get("SLURM_STEP_NODELIST")
                                                               or env.get("SLURM_JOB_NODELIST", "")))
                                    if nnodes > 1 else "127.0.0.1")
        return _checked(Identity(
            rank=_int(env, "SLURM_PROCID"), world_size=ntasks, local_rank=_int(env, "SLURM_LOCALID", 0),
            local_world_size=ntasks if nnodes == 1 else -1, master_addr=master,
            master_port=_port(env, slurm_port(env)), launcher="slurm", host=host,
            run_id=f"{env.get('SLURM_JOB_ID', 'slurm')}.{env['SLURM_STEP_ID']}"))
    for names in MPI_ENV:  # mpirun / mpiexec: Open MPI, then MPICH and Intel MPI (Hydra)
        if names[0] in env and names[1] in env:
            return _mpi(env, *names, host=host)
    return None


# (rank, size, local rank, local size) as each MPI's launcher names them
MPI_ENV = (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
           ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"))


def _mpi(env, rank: str, size: str, local_rank: str, local_size: str, host: str) -> Identity:
    """An MPI launcher's ranks: the job store at MASTER_ADDR (this node when every rank is local)."""
    n = _int(env, size)
    local_n = _int(env, local_size, n)
    return _checked(Identity(
        rank=_int(env, rank), world_size=n, local_rank=_int(env, local_rank, 0), local_world_size=local_n,
        master_addr=_addr(env, "127.0.0.1" if local_n == n else ""),
        master_port=_port(env), launcher="mpi", host=host))


# What detect() reads to tell a launcher's rank (torchrun's, Slurm's, MPI's)
IDENTITY_VARS = ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID",
                 *(name for names in MPI_ENV for name in names))


def slurm_task_per_node(env=None) -> int | None:
    """A Slurm step with one task on each of its nodes (srun --ntasks-per-node 1): its node count; else None."""
    env = os.environ if env is None else env
    if "SLURM_PROCID" not in env or "SLURM_STEP_ID" not in env:
        return None
    per_node = (env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or "").strip()
    m = re.fullmatch(r"1(?:\(x(\d+)\))?", per_node)
    return (int(m.group(1)) if m.group(1) else 1) if m else None


def leave_launcher(env=None) -> None:
    """This process stops being a launcher's rank: what it starts (a command's own jobs) launches itself on this
    node, as a command started with no launcher does. The node's own settings (CUDA_VISIBLE_DEVICES) stay."""
    env = os.environ if env is None else env
    for name in IDENTITY_VARS:
        env.pop(name, None)


OWN_LAUNCHER = "nccl_bench's own launcher, one node"


def describe(env=None) -> str:
    """The launcher as a result's metadata says it. Our own launcher's ranks carry torchrun's variables (so that
    torch's calls find them), which must not make them read as torchrun's."""
    env = os.environ if env is None else env
    ident = detect(env)
    if ident is None:
        return f"none (self-launch: {OWN_LAUNCHER})"
    if self_launched(ident, env):
        return f"{OWN_LAUNCHER} (rank {ident.rank} of {ident.world_size})"
    return f"{ident.launcher} (rank {ident.rank} of {ident.world_size})"


def local_device(local_rank: int, visible: int) -> int:
    """The GPU a node's `local_rank`-th rank drives, as every backend places ranks: one each, round-robin past
    the `visible` GPUs (more ranks than GPUs share them)."""
    return local_rank % max(visible, 1)


def self_launched(ident: Identity | None, env=None) -> bool:
    """Whether this process is a rank that a launcher of ours started: its driver checked the command's options,
    outputs and sizes before it started any rank (nccl_bench.job.driver)."""
    from nccl_bench import SELF_LAUNCH_ENV
    return ident is not None and bool((os.environ if env is None else env).get(SELF_LAUNCH_ENV))
