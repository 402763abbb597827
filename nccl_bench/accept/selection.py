"""Which profile judges this node: the one --profile names; else the built-in profile for this
backend, GPU model and count and NVLS; else one derived from the node's own facts (accept.derive)."""
from __future__ import annotations

from nccl_bench.core.errors import UsageError
from nccl_bench.accept.derive import MARGIN, derive
from nccl_bench.records.profiles import Profile, builtin_names, load
from nccl_bench.accept.topology import nvls_enabled


def choose(spec: str | None, backend: str, gpu_names: list[str], facts=None, margin: float | None = None) -> Profile:
    """The profile named by --profile; else the built-in one matching this backend, these GPUs and NVLS;
    else one derived from the node's facts (accept.derive); UsageError only where none can be had."""
    if spec:
        return load(spec)
    nvls = facts.nvls if facts is not None else nvls_enabled()
    fits = [p for p in map(load, builtin_names()) if p.match.fits(backend, gpu_names, nvls)]
    if len(fits) == 1:
        return fits[0]
    hw = f"{len(gpu_names)} x {gpu_names[0]}" if gpu_names else "no GPUs"
    if not fits and facts is not None and backend in ("nccl", "torch"):
        return derive(facts, (backend,), MARGIN if margin is None else margin)
    if not fits:
        raise UsageError(f"no built-in profile for backend {backend} on {hw} and no GPU facts to derive one from "
                         f"(built in: {', '.join(builtin_names())}); pass one with --profile NAME|PATH")
    raise UsageError(f"several profiles fit backend {backend} on {hw}: {', '.join(p.name for p in fits)}; "
                     "choose one with --profile NAME")


def detected_gpu_names() -> list[str]:
    from nccl_bench.core.sysinfo import gpus
    return [d["name"] for d in gpus()["devices"]]
