"""Which algorithm NCCL ran for each call, asked of NCCL in the job itself: algorecorder.c, a profiler plugin
of our own, is loaded by NCCL (NCCL_PROFILER_PLUGIN, set before a process's first communicator) and by us
(the same file: one copy in the process, so we share its record). It records nothing, and costs a timed
loop nothing, until `recording()` asks for collective events. It replaced a second launch with NCCL_DEBUG's
TUNING log (NCCL reads NCCL_DEBUG once per process, and a log line per call would slow every timed call).

    enable()                 # in a rank, before its first NCCL communicator: the plugin is loaded with it
    with recording() as calls:
        ... one call (bench: each size's untimed sync launch, nccl_bench.measure.sweep) ...
    calls -> [Call(func="AllReduce", count=2, datatype="ncclFloat32", algo="RING", proto="LL"), ...]
"""
from __future__ import annotations

import contextlib
import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

from nccl_bench.comm import launchloop

SOURCE = Path(__file__).with_name("algorecorder.c")
PLUGIN_ENV = "NCCL_PROFILER_PLUGIN"


@dataclass(frozen=True)
class Call:
    func: str  # NCCL's name: AllReduce, AllGather, ...
    count: int
    datatype: str
    algo: str  # upper case: RING, TREE, NVLS, ...
    proto: str  # LL, LL128, SIMPLE


class _Record(ctypes.Structure):
    _fields_ = [("func", ctypes.c_char * 32), ("count", ctypes.c_uint64), ("datatype", ctypes.c_char * 24),
                ("algo", ctypes.c_char * 24), ("proto", ctypes.c_char * 24)]


_LIB: list = []  # [(library or None, why not)]


def enable() -> str | None:
    """Build the plugin and name it to NCCL; None when it is ready, else why not (no compiler, another
    profiler plugin asked for by the user, whose choice stands)."""
    if _LIB:
        return _LIB[0][1]
    given = os.environ.get(PLUGIN_ENV)
    try:
        path = launchloop.build(SOURCE)
        if given and Path(given) != path:
            raise OSError(f"{PLUGIN_ENV} names another profiler plugin ({given})")
        os.environ[PLUGIN_ENV] = str(path)
        lib = ctypes.CDLL(str(path))
        lib.nb_record.argtypes, lib.nb_record.restype = [ctypes.c_int], ctypes.c_int
        lib.nb_count.restype = ctypes.c_int
        lib.nb_call_at.argtypes, lib.nb_call_at.restype = [ctypes.c_int], ctypes.POINTER(_Record)
        _LIB.append((lib, None))
    except OSError as e:
        _LIB.append((None, str(e)))
    return _LIB[0][1]


@contextlib.contextmanager
def recording():
    """The calls NCCL starts inside the block, in order (empty where the plugin is not loaded: enable()
    says why, or NCCL did not load it)."""
    calls: list[Call] = []
    lib = _LIB[0][0] if _LIB else None
    if lib is None:
        yield calls
        return
    lib.nb_forget()
    lib.nb_record(1)
    try:
        yield calls
    finally:
        lib.nb_record(0)
        for i in range(lib.nb_count()):
            r = lib.nb_call_at(i).contents
            calls.append(Call(r.func.decode(), int(r.count), r.datatype.decode(), r.algo.decode().upper(),
                              r.proto.decode().upper()))
        lib.nb_forget()


def loaded() -> bool:
    """Whether NCCL loaded the plugin (it hands over its mask at a communicator's init)."""
    lib = _LIB[0][0] if _LIB else None
    return bool(lib is not None and lib.nb_record(0))
