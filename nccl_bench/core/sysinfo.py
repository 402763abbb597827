"""What this machine is: versions, GPUs and how they are linked, the launcher.

Used by `info` and by the metadata block every result file carries.
"""
from __future__ import annotations

import contextlib
import os
import platform
import re
import sys
import subprocess
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Every torch release through 2.15 ships the unscoped scalable-init keys (pytorch#178473).
LAST_TORCH_WITH_UNSCOPED_KEYS = (2, 15)


def torch_version() -> str:
    """torch's version, without importing torch where this process has not (a command's driver)."""
    if "torch" in sys.modules:
        return sys.modules["torch"].__version__
    try:
        from importlib.metadata import version
        return version("torch")
    except Exception:  # no installed metadata to read (a source tree on the path): ask torch itself
        import torch
        return torch.__version__


def torch_reuses_unscoped_keys() -> dict:
    """Whether the installed torch's scalable init reads `UniqueNCCLID:<root>` unscoped."""
    v = torch_version()
    m = re.match(r"(\d+)\.(\d+)", v)
    major_minor = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    known = major_minor <= LAST_TORCH_WITH_UNSCOPED_KEYS
    return {"torch": v, "reuses_unscoped_keys": True if known else None,
            "why": (f"torch {v} <= 2.15: every release through 2.15 keys scalable-init IDs as "
                    "UniqueNCCLID:<root> with no per-communicator scope (pytorch#178473)") if known
            else f"torch {v} is newer than 2.15: not known; run `python -m stress --backend torch --init stock`"}


def nccl_info() -> dict:
    """NCCL version and library path (nccl4py's view when installed, else torch's)."""
    out = {"version": None, "path": None, "nccl4py": None}
    try:
        from importlib.metadata import version
        out["nccl4py"] = version("nccl4py")
    except Exception:  # not installed: the metadata says so by its absence
        pass
    try:
        import nccl.core as nc
        vi = nc.get_version()
        if vi.libnccl is not None:
            out["version"] = str(vi.libnccl.version)
            out["path"] = str(vi.libnccl.path) if vi.libnccl.path else None
    except Exception:  # nccl4py's own lookup failed: torch's view, and the library searched below
        pass
    # torch's view only where nccl4py gave none (a rank without torch must not load it for a version), and
    # with a GPU: without one there is no NCCL to import torch for
    if out["version"] is None and ("torch" in sys.modules or nvidia_driver()):
        try:
            import torch
            if torch.cuda.is_available():
                v = torch.cuda.nccl.version()
                out["version"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:  # a torch without NCCL: the version is not known
            pass
    if out["path"] is None:
        out["path"] = mapped_lib("libnccl")
    return out


def nvidia_driver() -> bool:
    """Whether an NVIDIA driver is loaded here (its control device, or GPUs listed in /proc)."""
    try:
        return os.path.exists("/dev/nvidiactl") or bool(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return False


def mapped_lib(name: str) -> str | None:
    """The path of a library whose name holds `name`, where this process has it mapped; else None."""
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            if name in line and "/" in line:
                return line.split()[-1]
    except OSError:
        pass
    return None


@contextlib.contextmanager
def _nvml():
    """(NVML, None) for the block, shut down after it; (None, why) where NVML cannot start."""
    try:
        import pynvml as nv
        nv.nvmlInit()
    except Exception as e:  # no NVML (its library, its driver): the caller says so
        yield None, f"no NVML: {type(e).__name__}"
        return
    try:
        yield nv, None
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # shutting NVML down: nothing left to report
            pass


@lru_cache(maxsize=1)
def gpus() -> dict:
    """GPU models, memory, driver, and the links between each pair (NVML)."""
    with _nvml() as (nv, why):
        if nv is None:  # the metadata says why
            return {"count": 0, "driver": None, "devices": [], "links": [], "why": why}
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in visible_indices(nv)]
        devices, bus = [], {}
        for i, h in enumerate(handles):
            name = nv.nvmlDeviceGetName(h)
            pci = nv.nvmlDeviceGetPciInfo(h).busId
            pci = pci.decode() if isinstance(pci, bytes) else pci
            bus[_norm_bus(pci)] = i
            devices.append({"index": i, "name": name if isinstance(name, str) else name.decode(),
                            "memory_gib": round(nv.nvmlDeviceGetMemoryInfo(h).total / 2**30, 1),
                            "pci_bus_id": pci})
        links = _links(nv, handles, bus)
        drv = nv.nvmlSystemGetDriverVersion()
        return {"count": len(handles), "driver": drv if isinstance(drv, str) else drv.decode(),
                "devices": devices, "links": links}


def gpu_memory_bytes() -> list[int]:
    """Each visible GPU's memory (NVML), and nothing else: what a command checks before it launches, without
    gpus()' link survey of every pair ([] without NVML)."""
    with _nvml() as (nv, _):
        if nv is None:  # nothing known to check against
            return []
        return [int(nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(i)).total) for i in visible_indices(nv)]


def visible_indices(nv, env=None) -> list[int]:
    """NVML's indices of the GPUs this process's CUDA sees, in CUDA's order: CUDA_VISIBLE_DEVICES (indices or
    UUIDs) where it is set, every GPU otherwise. A node's facts are those of the GPUs its jobs run on."""
    env = os.environ if env is None else env
    count = nv.nvmlDeviceGetCount()
    if "CUDA_VISIBLE_DEVICES" not in env:
        return list(range(count))
    out = []
    for item in (v.strip() for v in env["CUDA_VISIBLE_DEVICES"].split(",")):
        if item.isdigit() and int(item) < count:
            out.append(int(item))
        elif item.startswith(("GPU-", "MIG-")):
            try:
                out.append(nv.nvmlDeviceGetIndex(nv.nvmlDeviceGetHandleByUUID(item)))
            except Exception:  # NVML's error for a UUID it does not know: CUDA sees no such GPU either
                break
        else:
            break  # CUDA stops at the first entry it cannot use, and so do we
    return out


def _norm_bus(bus_id: str) -> str:
    return bus_id.lower()[-12:]  # ignore the domain's width


def _links(nv, handles, bus) -> list[dict]:
    """Each GPU pair: NV<k> as `nvidia-smi topo -m` shows it, else the PCIe relationship.

    k counts the NVLinks from one GPU straight to the other. Through NVSwitches (HGX 4/8-GPU
    boards) a link's far end is a switch, and a pair reaches each other over all of its links:
    k is the smaller GPU's switch-link count. Where the far end cannot be read (seen in VMs)
    but NVML says the pair talks over NVLink, the same rule applies to its active links.
    """
    counts: dict[tuple[int, int], int] = {}
    to_switch = [0] * len(handles)
    for i, h in enumerate(handles):
        for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
            try:
                if nv.nvmlDeviceGetNvLinkState(h, link) != nv.NVML_FEATURE_ENABLED:
                    continue
                if _far_end_is_switch(nv, h, link):
                    to_switch[i] += 1
                    continue
                remote = nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId
                remote = remote.decode() if isinstance(remote, bytes) else remote
            except Exception:  # NVML's error for an unused link: no peer
                continue
            j = bus.get(_norm_bus(remote))
            if j is not None and j != i:
                counts[(min(i, j), max(i, j))] = counts.get((min(i, j), max(i, j)), 0) + 1
    active = [_active_links(nv, h) for h in handles]
    out = []
    for i in range(len(handles)):
        for j in range(i + 1, len(handles)):
            k = counts.get((i, j), 0) // 2 or counts.get((i, j), 0)
            if not k and to_switch[i] and to_switch[j]:
                k = min(to_switch[i], to_switch[j])
            if not k and not counts and _p2p_nvlink(nv, handles[i], handles[j]):
                k = min(active[i], active[j])  # far ends unreadable
            if k:
                out.append({"gpus": [i, j], "link": f"NV{k}"})
            else:
                try:
                    lvl = nv.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j])
                    out.append({"gpus": [i, j], "link": {0: "SELF", 10: "PIX", 20: "PXB", 30: "PHB",
                                                          40: "NODE", 50: "SYS"}.get(int(lvl), str(lvl))})
                except Exception:  # NVML's error: the path between the two is not known
                    out.append({"gpus": [i, j], "link": "?"})
    return out


def _far_end_is_switch(nv, h, link) -> bool:
    try:
        return nv.nvmlDeviceGetNvLinkRemoteDeviceType(h, link) == getattr(nv, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 1)
    except Exception:  # NVML's error: not known to reach a switch
        return False


def _active_links(nv, h) -> int:
    n = 0
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            n += nv.nvmlDeviceGetNvLinkState(h, link) == nv.NVML_FEATURE_ENABLED
        except Exception:  # NVML's error for a link it does not have: not counted
            continue
    return n


def _p2p_nvlink(nv, a, b) -> bool:
    try:
        return nv.nvmlDeviceGetP2PStatus(a, b, nv.NVML_P2P_CAPS_INDEX_NVLINK) == nv.NVML_P2P_STATUS_OK
    except Exception:  # NVML's error: not known to have NVLink P2P
        return False


def git_sha() -> str | None:
    if os.environ.get("NCCL_BENCH_GIT_SHA"):  # a snapshot without .git (e.g. copied to a GPU machine)
        return os.environ["NCCL_BENCH_GIT_SHA"]
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        sha = out.stdout.strip()
        if sha and subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", "HEAD", "--", "nccl_bench", "stress"],
                                  capture_output=True, timeout=5).returncode:
            sha += "+dirty"
        return sha or None
    except Exception:  # not a git checkout, or no git: no sha to record
        return None


def machine_name() -> str:
    """'h200x2' from the GPU model and count; 'cpu' without GPUs (asv records no GPU)."""
    g = gpus()
    if not g["count"]:
        return "cpu"
    model = g["devices"][0]["name"].replace("NVIDIA", "").strip().split()[0].lower()
    return f"{model}x{g['count']}"


def environment_knobs() -> dict:
    """NCCL and PyTorch variables that change behaviour."""
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(("NCCL_", "TORCH_NCCL_", "TORCH_SYMM_MEM")) or k in ("CUDA_VISIBLE_DEVICES",)}


def versions(g: dict | None = None) -> dict:
    """torch, NCCL, nccl4py, driver and Python versions (None where not known)."""
    g = g or gpus()
    nccl = nccl_info()
    return {"torch": torch_version(), "nccl": nccl["version"], "nccl4py": nccl["nccl4py"],
            "driver": g["driver"], "python": platform.python_version()}


def collect(backend: str | None = None, hosts: list[str] | None = None) -> dict:
    """The metadata block of every result file."""
    from nccl_bench.core.launch import describe, node_name
    g = gpus()
    return {
        "versions": versions(g),
        "gpus": g["devices"], "links": g["links"], "machine": machine_name(),
        "hosts": hosts or [node_name()], "backend": backend,
        "launcher": describe(), "git_sha": git_sha(), "env": environment_knobs(),
    }
