"""NVTX: one domain for the project, nested ranges and marks with round and rank as payload.

Ranges nest round -> skew -> bootstrap -> init -> verify -> destroy in stress, and
collective -> size in bench, so an Nsight Systems timeline reads like the journal.
Without the nvtx package (or with NCCL_BENCH_NVTX=0) every call is a no-op.
"""
from __future__ import annotations

import contextlib
import os

DOMAIN = "nccl_bench"

try:
    if os.environ.get("NCCL_BENCH_NVTX", "1") == "0":
        raise ImportError
    import nvtx as _nvtx
    _domain = _nvtx.get_domain(DOMAIN)
except Exception:  # nvtx missing or broken: markers cost nothing
    _nvtx = None
    _domain = None

COLORS = {"round": "blue", "skew": "grey", "bootstrap": "cyan", "init": "green", "verify": "yellow",
          "destroy": "purple", "abort": "red", "collective": "green", "size": "cyan", "failure": "red"}


def enabled() -> bool:
    return _domain is not None


def _attrs(name: str, payload: dict):
    detail = " ".join(f"{k}={v}" for k, v in payload.items())
    number = payload.get("round", payload.get("bytes"))
    return _domain.get_event_attributes(message=f"{name} {detail}".strip(), color=COLORS.get(name),
                                        payload=number if isinstance(number, int) else None)


@contextlib.contextmanager
def span(name: str, **payload):
    """A pushed/popped NVTX range in the project's domain."""
    if _domain is None:
        yield
        return
    _domain.push_range(_attrs(name, payload))
    try:
        yield
    finally:
        _domain.pop_range()


def mark(name: str, **payload) -> None:
    """An instant NVTX mark (e.g. at each failure)."""
    if _domain is not None:
        _domain.mark(_attrs(name, payload))
