"""Checks of the node and the process environment rather than a GPU: /dev/shm, the variables
that change what NCCL or PyTorch does, and whether PyTorch's scalable init (pytorch#178473) is in use."""
from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

from nccl_bench.accept.check import Check
from nccl_bench.accept.xid import check_kernel_xids


SHM_FAIL_BYTES = 256 * 2**20  # NCCL's intra-node buffers need room; Docker's 64 MiB default breaks it
SHM_WARN_BYTES = 2 * 2**30
STALE_AFTER_S = 60.0


def _mapped_paths() -> set[str]:
    """Files any readable process has mapped (an nccl-* segment in use is mapped)."""
    found = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                for line in (d / "maps").read_text().splitlines():
                    if "/dev/shm/" in line or "nccl" in line:
                        found.add(line.split(None, 5)[-1].replace(" (deleted)", ""))
    return found


def check_shm(shm: str | Path = "/dev/shm") -> Check:
    name = "shm"
    shm = Path(shm)
    try:
        usage = shutil.disk_usage(shm)
        entries = list(shm.glob("nccl-*"))
    except OSError as e:
        return Check(name, "fail", f"{shm}: {e.strerror}", "NCCL needs a writable /dev/shm (docker --shm-size)")
    now, mapped = time.time(), _mapped_paths()
    stale = []
    for p in entries:
        with contextlib.suppress(OSError):
            if now - p.stat().st_mtime > STALE_AFTER_S and str(p) not in mapped:
                stale.append(p.name)
    ev = f"{usage.free / 2**30:.2f} GiB free of {usage.total / 2**30:.2f} GiB; {len(stale)} stale nccl-* file(s)"
    if stale:
        ev += ": " + ", ".join(sorted(stale)[:5]) + (" ..." if len(stale) > 5 else "")
    data = {"free_bytes": usage.free, "total_bytes": usage.total, "stale": sorted(stale)}
    if usage.free < SHM_FAIL_BYTES:
        return Check(name, "fail", ev, "too little shared memory for NCCL: enlarge /dev/shm (docker --shm-size=16g)"
                     + (", remove stale files: rm /dev/shm/nccl-*" if stale else ""), data=data)
    if stale:
        return Check(name, "warn", ev, "no job running? remove them: rm /dev/shm/nccl-*", data=data)
    if usage.free < SHM_WARN_BYTES:
        return Check(name, "warn", ev, "little shared memory: enlarge /dev/shm (docker --shm-size=16g)", data=data)
    return Check(name, "pass", ev, data=data)


# Variables that change what NCCL or PyTorch does: (prefix or name, why it matters).
ENV_RULES = (
    ("NCCL_ALGO", "forces the algorithm: numbers are not comparable with NCCL's own choice"),
    ("NCCL_PROTO", "forces the protocol: numbers are not comparable with NCCL's own choice"),
    ("NCCL_DEBUG", "INFO/TRACE logging slows init and floods logs"),
    ("TORCH_NCCL_RANKS_PER_ROOT", "selects PyTorch's scalable init, whose keys are not scoped (pytorch#178473)"),
    ("TORCH_NCCL_BLOCKING_WAIT", "changes how PyTorch waits and times out"),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0 lets a failed collective hang instead of aborting"),
)
NEUTRAL_DEBUG = ("", "VERSION", "WARN")


def env_knobs(environ=None) -> dict:
    environ = os.environ if environ is None else environ
    return {k: v for k, v in sorted(environ.items())
            if k in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_DEBUG") or k.startswith("TORCH_NCCL_")}


def check_env(environ=None) -> Check:
    name = "env"
    knobs = env_knobs(environ)
    notes = []
    for var, why in ENV_RULES:
        value = knobs.get(var)
        if value is None:
            continue
        if var == "NCCL_DEBUG" and value.upper() in NEUTRAL_DEBUG:
            continue
        if var == "TORCH_NCCL_ASYNC_ERROR_HANDLING" and value != "0":
            continue
        notes.append(f"{var}={value}: {why}")
    ev = ", ".join(f"{k}={v}" for k, v in knobs.items()) or "no NCCL_ALGO/PROTO/NVLS_ENABLE/DEBUG or TORCH_NCCL_* set"
    if notes:
        return Check(name, "warn", ev + " | " + "; ".join(notes), "unset them unless the run means to test them",
                     data={"knobs": knobs})
    return Check(name, "pass", ev, data={"knobs": knobs})


def check_torch_keys(world_size: int, environ=None) -> Check:
    """Does the installed torch reuse unscoped scalable-init keys, and does this job size hit them?"""
    from nccl_bench.core.sysinfo import torch_reuses_unscoped_keys
    name = "torch_scalable_init_keys"
    environ = os.environ if environ is None else environ
    info = torch_reuses_unscoped_keys()
    try:
        per_root = int(environ.get("TORCH_NCCL_RANKS_PER_ROOT", 128))
    except ValueError:
        per_root = 128
    scalable = world_size > per_root
    data = {**info, "ranks_per_root": per_root, "scalable_init_in_use": scalable}
    if info["reuses_unscoped_keys"] is None:
        return Check(name, "warn", info["why"], "check with: python -m stress --backend torch --init stock", data=data)
    if not info["reuses_unscoped_keys"]:
        return Check(name, "pass", info["why"], data=data)
    ev = f"{info['why']}; {world_size} ranks, {per_root} per root: scalable init {'in' if scalable else 'not in'} use"
    if scalable:
        return Check(name, "warn", ev, "re-inits in one process group can read a stale ID and hang: use one fresh "
                     "store prefix per init, or TORCH_NCCL_RANKS_PER_ROOT >= world size", data=data)
    return Check(name, "pass", ev, data=data)


def host_checks(shm: str | Path = "/dev/shm") -> list[Check]:
    """Checks of the node rather than a GPU: run once per node (local rank 0)."""
    out = []
    for name, fn in (("kernel_xids", check_kernel_xids), ("shm", lambda: check_shm(shm))):
        try:
            out.append(fn())
        except Exception as e:  # a check that cannot look is a warn that says why; doctor goes on
            out.append(Check(name, "warn", f"could not check: {type(e).__name__}: {e}"))
    return out
