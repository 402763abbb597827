"""The node's InfiniBand and RoCE ports, as NCCL's IB transport would find them: sysfs's
/sys/class/infiniband/<device>/ports/<port>/{state,rate,link_layer}. The network floor of an
across-node check (accept.network) is derived from them. NCCL_BENCH_SYSFS points elsewhere (a copy of
another node's tree, a what-if); reading is bounded in devices, ports and bytes.
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

SYSFS_ENV = "NCCL_BENCH_SYSFS"
MAX_DEVICES, MAX_PORTS, MAX_BYTES = 64, 16, 256


@dataclass(frozen=True)
class Port:
    device: str  # mlx5_0
    port: int
    active: bool  # state "4: ACTIVE"
    rate_Gbps: float | None  # "400 Gb/sec (4X NDR)" -> 400.0
    link_layer: str  # InfiniBand | Ethernet (RoCE)

    def as_dict(self) -> dict:
        return asdict(self)

    def name(self) -> str:
        kind = "RoCE" if self.link_layer == "Ethernet" else self.link_layer or "?"
        rate = f"{self.rate_Gbps:g} Gb/s" if self.rate_Gbps else "rate unknown"
        return f"{self.device}/{self.port} {kind} {rate}{'' if self.active else ' (down)'}"


def root() -> Path:
    return Path(os.environ.get(SYSFS_ENV) or "/sys") / "class" / "infiniband"


def _small(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_BYTES).decode("ascii", "replace").strip()
    except OSError:  # a port without the file (or gone meanwhile): read as unknown
        return ""


def _rate(text: str) -> float | None:
    m = re.match(r"\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec", text)
    return float(m.group(1)) if m else None


def read() -> list[Port]:
    """Every port of every device under sysfs's infiniband class; [] where there is none."""
    base = root()
    try:
        devices = sorted(p for p in base.iterdir())[:MAX_DEVICES]
    except OSError:  # no infiniband class: no IB or RoCE device on this node
        return []
    ports = []
    for dev in devices:
        try:
            numbers = sorted((p for p in (dev / "ports").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
        except OSError:  # a device without ports
            continue
        for p in numbers[:MAX_PORTS]:
            state = _small(p / "state")
            ports.append(Port(device=dev.name, port=int(p.name), active="ACTIVE" in state.upper(),
                              rate_Gbps=_rate(_small(p / "rate")), link_layer=_small(p / "link_layer")))
    return ports
