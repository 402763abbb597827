"""The profiler plugin that tells which algorithm NCCL ran (comm.algorecorder), driven as NCCL drives it:
its v5 interface called through the very struct NCCL finds with dlsym, on a mask of our own. On GPUs NCCL
itself loads it (tests/gpu_checks.py's bench checks confirm every algorithm through it)."""
import ctypes
import os

import pytest

from nccl_bench.comm import algorecorder

COLL = 1 << 1  # ncclProfileColl


class _Coll(ctypes.Structure):  # the descriptor's coll member (NCCL's profiler_v5.h)
    _fields_ = [("seqNumber", ctypes.c_uint64), ("func", ctypes.c_char_p), ("sendBuff", ctypes.c_void_p),
                ("recvBuff", ctypes.c_void_p), ("count", ctypes.c_size_t), ("root", ctypes.c_int),
                ("datatype", ctypes.c_char_p), ("nChannels", ctypes.c_uint8), ("nWarps", ctypes.c_uint8),
                ("algo", ctypes.c_char_p), ("proto", ctypes.c_char_p), ("parentGroup", ctypes.c_void_p)]


class _Descr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint64), ("parentObj", ctypes.c_void_p), ("rank", ctypes.c_int), ("coll", _Coll)]


INIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64, ctypes.POINTER(ctypes.c_int),
                        ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
START = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_Descr))


class _Profiler(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("init", INIT), ("startEvent", START), ("stopEvent", ctypes.c_void_p),
                ("recordEventState", ctypes.c_void_p), ("finalize", ctypes.c_void_p)]


@pytest.fixture
def plugin(monkeypatch, tmp_path):
    monkeypatch.setenv("NCCL_BENCH_CACHE", str(tmp_path))
    monkeypatch.delenv(algorecorder.PLUGIN_ENV, raising=False)
    monkeypatch.setattr(algorecorder, "_LIB", [])
    assert algorecorder.enable() is None
    path = os.environ[algorecorder.PLUGIN_ENV]  # what NCCL will dlopen
    return _Profiler.in_dll(ctypes.CDLL(path), "ncclProfiler_v5")


def _call(prof, func: bytes, count: int, algo: bytes) -> None:
    d = _Descr(type=COLL, coll=_Coll(func=func, count=count, datatype=b"ncclFloat32", algo=algo, proto=b"LL"))
    handle = ctypes.c_void_p()
    assert prof.startEvent(None, ctypes.byref(handle), ctypes.byref(d)) == 0


def test_nccl_asks_for_nothing_until_a_recording_and_the_calls_come_back(plugin):
    assert plugin.name == b"nccl_bench"
    assert not algorecorder.loaded()  # no communicator yet: NCCL has not handed over its mask
    mask, ctx = ctypes.c_int(-1), ctypes.c_void_p()
    assert plugin.init(ctypes.byref(ctx), 7, ctypes.byref(mask), b"comm", 1, 2, 0, None) == 0
    assert mask.value == 0 and algorecorder.loaded()  # a timed loop pays nothing: no event is asked for
    with algorecorder.recording() as calls:
        assert mask.value == COLL
        _call(plugin, b"AllReduce", 2, b"Ring")
        _call(plugin, b"AllGather", 1024, b"Tree")
    assert mask.value == 0
    assert [(c.func, c.count, c.algo, c.proto) for c in calls] == [("AllReduce", 2, "RING", "LL"),
                                                                   ("AllGather", 1024, "TREE", "LL")]
    with algorecorder.recording() as again:
        pass
    assert again == []  # each recording starts empty


def test_a_users_own_profiler_plugin_stands(monkeypatch, tmp_path):
    monkeypatch.setenv("NCCL_BENCH_CACHE", str(tmp_path))
    monkeypatch.setenv(algorecorder.PLUGIN_ENV, "/opt/their/libprofiler.so")
    monkeypatch.setattr(algorecorder, "_LIB", [])
    assert "names another profiler plugin" in algorecorder.enable()
    assert os.environ[algorecorder.PLUGIN_ENV] == "/opt/their/libprofiler.so"
    with algorecorder.recording() as calls:
        pass
    assert calls == []
