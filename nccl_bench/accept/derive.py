"""Expectations from the hardware: what a node should reach, worked out from what it reports
(accept.topology.NodeFacts), for any GPU model and count with no profile of its own.

    expected busbw(collective) = bottleneck bandwidth x efficiency(collective, transport)
    floor                      = expected x margin            (margin 0.85 unless told)

The bottleneck, in GB/s per GPU per direction:
    nvswitch        NVLinks per GPU x the generation's per-link rate (NVLink 3: 25, 4: 26.56, 5: 50)
    nvlink (direct) the fewest NVLinks joining two GPUs x (GPUs - 1) x the per-link rate
    pcie            some pair has no NVLink: the PCIe link, generation x width
The transport picks the efficiency row; NVLink SHARP (nvls) changes all_reduce only. One GPU has no
collective to judge (nccl-tests' busbw factor is 0 with one rank): its floors are the device's
copies, HBM for device-to-device and PCIe for host copies. Every number below names its source;
a recorded golden node (accept --record-baseline) replaces all of them.
"""
from __future__ import annotations

from nccl_bench.records.profiles import COLLECTIVES, BusbwFloor, Match, Profile
from nccl_bench.accept.topology import NodeFacts

MARGIN = 0.85
SIZE = 1 << 30  # floors at 1 GiB: large enough for every collective to reach its bandwidth

# Efficiency = measured busbw / bottleneck, per collective, out of place, NCCL choosing the algorithm.
_ANCHOR = {  # nccl-tests' busbw at 1 GiB on the anchor pair (SOURCES["nvlink"]; docs/accept.md)
    "all_reduce": 328.5, "all_gather": 269.3, "reduce_scatter": 276.9, "broadcast": 365.0, "reduce": 370.4,
    "alltoall": 332.1, "sendrecv": 360.7}
_NVLINK = {c: round(v / (18 * 26.5625), 3) for c, v in _ANCHOR.items()}
# On NVSwitch every collective runs near NVLink's effective bandwidth, and NVLink SHARP lifts all_reduce
# above it (SOURCES["nvswitch"], SOURCES["nvls"]: NCCL's maintainer's figures)
_EFFECTIVE = round(370 / (18 * 26.5625), 3)
EFFICIENCY = {
    "nvlink": _NVLINK,
    "nvswitch": {c: _EFFECTIVE for c in _NVLINK},
    "nvls": {**{c: _EFFECTIVE for c in _NVLINK}, "all_reduce": round(480 / (18 * 26.5625), 3)},
    # NCCL's own topology model takes 12 GB/s of a PCIe gen3 x16's 15.75 (src/graph/topo.h PCI_BW): 0.76
    "pcie": {c: 0.76 * min(1.0, e / _NVLINK["all_reduce"]) for c, e in _NVLINK.items()},
}
SOURCES = {
    "nvlink": "docs/validation.md#anchors: nccl-tests 2.19.6 on 2 x H200 NV18, 1 GiB, NVLS off (busbw / 478 GB/s)",
    "nvswitch": "NVIDIA/nccl-tests#212: effective NVLink busbw about 370 GB/s of 478 on 8 x H100 (RING or any "
                "collective but NVLS all_reduce); #309: 368.8 GB/s all_reduce with NVLS disabled",
    "nvls": "NVIDIA/nccl-tests#212: NVLS all_reduce peak busbw about 480 GB/s on 8 x H100; others as nvswitch",
    "pcie": "NCCL src/graph/topo.h: 12 GB/s usable of PCIe gen3 x16 (0.76 of the link)",
}
# Two GPUs run NCCL's two-rank ring and tree over their own links whether a switch sits between them or
# not, so a pair on NVSwitch takes the pair anchor's row (PAIR_SOURCE; the check is in docs/accept.md)
PAIR_SOURCE = ("docs/validation.md#anchors: nccl-tests 2.19.6 on 2 x H200 NV18, 1 GiB, NVLS off (busbw / 478 GB/s): "
               "two ranks on NVSwitch measure as a direct pair (2 x H100, results/h100x2/accept)")


def efficiency(kind: str, gpus: int) -> tuple[dict, str]:
    """(busbw / bottleneck per collective, its source) for `gpus` GPUs on `kind`."""
    if gpus == 2 and kind in ("nvswitch", "nvls"):
        return {**_NVLINK, **({"all_reduce": EFFICIENCY["nvls"]["all_reduce"]} if kind == "nvls" else {})}, \
            PAIR_SOURCE + ("; NVLS all_reduce: " + SOURCES["nvls"] if kind == "nvls" else "")
    return EFFICIENCY[kind], SOURCES[kind]


HBM_GBPS = (("H200", 4800), ("H100 PCIe", 2000), ("H100", 3350), ("H800", 3350), ("A100-SXM4-80GB", 2039),
            ("A100 80GB PCIe", 1935), ("A100", 1555), ("B200", 8000), ("GB200", 8000), ("L40S", 864))
COPY_EFFICIENCY = 0.9
# host copies over PCIe: Azure's per-SKU floors over the link's rate, the lower of the two (docs/accept.md)
HOST_COPY_EFFICIENCY = 0.80
LATENCY_US = {"nvswitch": 40.0, "nvls": 40.0, "nvlink": 40.0, "pcie": 80.0}  # the built-in pair's; PCIe doubled
INIT_MS_2GPU, INIT_MS_PER_GPU = 100.0, 25.0  # the built-in pair's; an assumed growth per GPU beyond 2


def hbm_GBps(model: str) -> float | None:
    return next((bw for key, bw in HBM_GBPS if key in model), None)


def transport(f: NodeFacts) -> tuple[str, float | None]:
    """(transport, bottleneck GB/s per GPU per direction); None where the node does not say."""
    rate = f.nvlink_link_GBps
    if f.gpus > 1 and f.nvlinks and rate and f.nvswitch:
        return ("nvls" if f.nvls else "nvswitch"), f.nvlinks * rate
    if f.gpus > 1 and rate and f.pair_links:
        return "nvlink", f.pair_links * (f.gpus - 1) * rate
    return "pcie", f.pcie_GBps


def expectations(f: NodeFacts) -> dict:
    """{transport, bottleneck_GBps, busbw_GBps: {collective: GB/s}, copy_GBps: {...}}."""
    kind, bottleneck = transport(f)
    eff, _ = efficiency(kind, f.gpus)
    busbw = {} if f.gpus < 2 or not bottleneck else {c: round(bottleneck * eff[c], 1) for c in COLLECTIVES}
    copy = {}
    hbm = hbm_GBps(f.gpu_model)
    if hbm:
        copy["device"] = round(hbm * COPY_EFFICIENCY, 1)
    if f.pcie_GBps:
        copy["h2d"] = copy["d2h"] = round(f.pcie_GBps * HOST_COPY_EFFICIENCY, 1)
    return {"transport": kind, "bottleneck_GBps": bottleneck, "busbw_GBps": busbw, "copy_GBps": copy}


def derive(f: NodeFacts, backends: tuple[str, ...] = ("nccl", "torch"), margin: float = MARGIN) -> Profile:
    """The derived profile of this node: floors = expectations x margin, its derivation kept as data."""
    exp = expectations(f)
    kind = exp["transport"]
    eff, eff_source = efficiency(kind, f.gpus)
    floors = tuple(BusbwFloor(c, SIZE, round(v * margin, 1)) for c, v in exp["busbw_GBps"].items())
    copy = {k: round(v * margin, 1) for k, v in exp["copy_GBps"].items()}
    short = f.gpu_model.replace("NVIDIA ", "").split()[0]
    derivation = {
        "inputs": f.as_dict(), "formula": "floor = bottleneck x efficiency(collective, transport) x margin",
        "transport": kind, "bottleneck_GBps": exp["bottleneck_GBps"], "margin": margin,
        "efficiency": {c: eff[c] for c in exp["busbw_GBps"]}, "efficiency_source": eff_source,
        "expected_busbw_GBps": exp["busbw_GBps"], "expected_copy_GBps": exp["copy_GBps"],
        "copy_source": f"HBM {hbm_GBps(f.gpu_model)} GB/s (datasheet) x {COPY_EFFICIENCY}; PCIe gen "
                       f"{f.pcie_gen} x{f.pcie_width} x {HOST_COPY_EFFICIENCY}",
        "limits_source": "latency and init limits: the h200x2 profile's (docs/validation.md#anchors), latency "
                         f"doubled on PCIe, init + {INIT_MS_PER_GPU:g} ms per GPU beyond 2 (assumed)"}
    return Profile(
        name=f"derived-{f.gpus}x{short}", match=Match(backends), busbw=floors,
        latency_8B_max_us=LATENCY_US[kind], init_max_ms=INIT_MS_2GPU + INIT_MS_PER_GPU * max(0, f.gpus - 2),
        wrong_max=0, stress_failures_max=0, counters_max_increase=dict(ZERO_COUNTERS),
        description=f"derived from this node: {f.gpus} x {f.gpu_model}, {assumed(f, exp)}",
        source=f"derived: {derivation['formula']}; {eff_source}", origin="derived", copy_min_GBps=copy,
        derivation=derivation)


ZERO_COUNTERS = {k: 0 for k in ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate", "remapped_uncorrectable",
                                "remap_pending", "remap_failure", "nvlink_replay", "nvlink_recovery", "nvlink_crc")}


def assumed(f: NodeFacts, exp: dict | None = None) -> str:
    """The one line on what was assumed: links, transport, bottleneck."""
    exp = exp or expectations(f)
    if f.gpus < 2:
        return (f"one GPU (no pair to link), PCIe gen {f.pcie_gen} x{f.pcie_width}: its copies are judged, "
                f"HBM {hbm_GBps(f.gpu_model) or '?'} GB/s")
    links = (f"NV{f.nvlinks} NVLink {f.nvlink_gen} to NVSwitch" if f.nvswitch else
             f"NV{f.pair_links} NVLink {f.nvlink_gen} between each pair" if f.pair_links else "no NVLink")
    bw = exp["bottleneck_GBps"]
    return (f"{links}, PCIe gen {f.pcie_gen} x{f.pcie_width}, NVLS {'on' if f.nvls else 'off'}: "
            f"{exp['transport']} at {bw:.0f} GB/s per GPU" if bw else f"{links}: no bottleneck known")
