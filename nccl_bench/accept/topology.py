"""What a node says about itself, as the derivation of its expectations needs it (accept.derive):
GPU model and count, NVLinks per GPU and their generation, NVSwitch or direct links, PCIe
generation and width, and whether NCCL may use NVLink SHARP (NVLS). Read from NVML; a test or a
what-if builds the same NodeFacts by hand (`NodeFacts(gpu_model="H100", gpus=8, ...)`).
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from nccl_bench.core.launch import local_device
from nccl_bench.core.sysinfo import visible_indices

# NVLink generation -> GB/s per link per direction (raw signalling rate / 8)
NVLINK_GBPS = {2: 25.0, 3: 25.0, 4: 26.5625, 5: 50.0}
# PCIe generation -> GB/s per lane per direction after line encoding
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


@dataclass(frozen=True)
class NodeFacts:
    gpu_model: str  # NVML's name of the model, as nvidia-smi prints it
    gpus: int
    nvlinks: int = 0  # active NVLinks per GPU (the smallest over the node's GPUs)
    nvlink_gen: int | None = None  # NVLink generation (3: A100, 4: H100/H200, 5: B200)
    nvswitch: bool = False  # the links end at NVSwitches (every GPU reaches every other over all of them)
    pair_links: int | None = None  # direct links: the fewest NVLinks between two GPUs (0: some pair has none)
    pcie_gen: int | None = None  # the slot's maximum (an idle GPU trains lower)
    pcie_width: int | None = None
    nvls: bool = False  # NVLink SHARP usable: NVSwitch, Hopper or later, NCCL_NVLS_ENABLE not 0

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def nvlink_link_GBps(self) -> float | None:
        return NVLINK_GBPS.get(self.nvlink_gen) if self.nvlink_gen else None

    @property
    def pcie_GBps(self) -> float | None:
        if not self.pcie_gen or not self.pcie_width:
            return None
        return PCIE_LANE_GBPS.get(self.pcie_gen, 0.0) * self.pcie_width


def nvls_enabled(env=None) -> bool:
    return (env if env is not None else os.environ).get("NCCL_NVLS_ENABLE", "1") != "0"


def read(local_ranks: list[int] | None = None) -> NodeFacts | None:
    """This node's facts from NVML (None without GPUs or NVML)."""
    try:
        import pynvml as nv
        nv.nvmlInit()
    except Exception:  # no NVML (not installed, no driver): no facts to derive from
        return None
    try:
        visible = visible_indices(nv)
        n = len(visible)
        idx = visible if local_ranks is None else sorted({visible[local_device(r, n)] for r in local_ranks if n})
        if not idx:
            return None
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in idx]
        name = nv.nvmlDeviceGetName(handles[0])
        name = name if isinstance(name, str) else name.decode()
        active, gens, switched = [], set(), []
        for h in handles:
            links, to_switch = 0, 0
            for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
                try:
                    if nv.nvmlDeviceGetNvLinkState(h, link) != nv.NVML_FEATURE_ENABLED:
                        continue
                except Exception:  # NVML's error for a link it does not have: not counted
                    continue
                links += 1
                try:
                    gens.add(int(nv.nvmlDeviceGetNvLinkVersion(h, link)))
                except Exception:  # NVML's error: the generation is unknown for this link
                    pass
                try:
                    to_switch += nv.nvmlDeviceGetNvLinkRemoteDeviceType(h, link) == getattr(
                        nv, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 1)
                except Exception:  # NVML's error: the far end is unknown, not a switch
                    pass
            active.append(links)
            switched.append(links > 0 and to_switch == links)
        pcie = [(_safe(nv.nvmlDeviceGetMaxPcieLinkGeneration, h), _safe(nv.nvmlDeviceGetMaxPcieLinkWidth, h))
                for h in handles]
        nvlinks = min(active) if active else 0
        switch = bool(switched) and all(switched)
        pair = None if switch or len(handles) < 2 else _fewest_pair_links([visible.index(i) for i in idx])
        hopper_or_later = any(m in name for m in ("H100", "H200", "H800", "H20", "GH200", "B100", "B200", "GB200"))
        return NodeFacts(gpu_model=name, gpus=len(handles), nvlinks=nvlinks,
                         nvlink_gen=nvlink_gen(name, max(gens) if gens else None) if nvlinks else None,
                         nvswitch=switch, pair_links=pair,
                         pcie_gen=min((g for g, _ in pcie if g), default=None),
                         pcie_width=min((w for _, w in pcie if w), default=None),
                         nvls=switch and hopper_or_later and nvls_enabled())
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # shutting NVML down: nothing left to report
            pass


def _safe(fn, h):
    try:
        return int(fn(h))
    except Exception:  # NVML's own errors: this fact is not known
        return None


MODEL_NVLINK_GEN = (("A100", 3), ("A800", 3), ("H100", 4), ("H200", 4), ("H800", 4), ("H20", 4),
                    ("B200", 5), ("B100", 5), ("GB200", 5))


def nvlink_gen(model: str, nvml_version: int | None) -> int | None:
    """The GPU model's NVLink generation where it is known (NVML's version number has not always
    matched the generation), else NVML's."""
    for key, gen in MODEL_NVLINK_GEN:
        if key in model:
            return gen
    return nvml_version if nvml_version in NVLINK_GBPS else None


def _fewest_pair_links(idx: list[int]) -> int:
    """Direct links: the fewest NVLinks between any two of these GPUs, by CUDA index (0 when a pair has none)."""
    from nccl_bench.core.sysinfo import gpus
    want = set(idx)
    fewest = None
    for lk in gpus().get("links", []):
        a, b = lk["gpus"]
        if a in want and b in want:
            k = int(lk["link"][2:]) if str(lk["link"]).startswith("NV") else 0
            fewest = k if fewest is None else min(fewest, k)
    return fewest or 0
