"""The launch loop: how the timed loop makes its `iters` launches, and what that costs the host.

nccl-tests launches from a C loop; a Python loop adds the interpreter's own cost between two
NCCL calls (bytecode, argument conversion, caches cooled by the interpreter), and on small
messages that host cost, not the GPUs, set our latency (issue 16). So the nccl backend
hands its whole loop to `launchloop.c`: NCCL's own function pointers (the ones nccl4py
loaded) with their arguments resolved once, called back to back in C. The C file has no
CUDA or NCCL dependency; it is compiled once with the machine's C compiler (`bin/setup`
does it, else the first use does) into a cache folder. Without a compiler, or on another
architecture, the loop stays in Python (`PythonLoop`) and the results' metadata says so;
NCCL_BENCH_LAUNCH=python asks for the Python loop (to compare the two).

A loop's `run(first, n)` makes iterations first .. first+n-1 (iteration i uses the calls of
step i % steps, as nccl-tests moves its buffers per iteration) and returns the host seconds
the loop took: what `-C/--report_cputime` reports. The timer's CUDA events go into the loop
too (`record(event, stream)` makes a hook, `run(..., before=, after=, marks=)` makes it): in
the compiled loop they are recorded from C right before the first and after the last launch,
so the interpreter's time around the loop (calling into C, returning) is not timed, as nccl-tests'
timer holds only its loop.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from nccl_bench.core import cudadriver

SOURCE = Path(__file__).with_name("launchloop.c")
# x86-64 System V and AArch64 pass integer arguments as launchloop.c assumes
ARCHES = ("x86_64", "amd64", "aarch64", "arm64")
MAX_ARGS = 8


class LoopError(Exception):
    """A call in the loop returned nonzero: the library's code and the iteration."""

    def __init__(self, code: int, iteration: int):
        super().__init__(f"call returned {code} at iteration {iteration}")
        self.code, self.iteration = code, iteration


class Late(Exception):
    """A gate (a line-up's exit) was not open within GATE_LIMIT_S: nothing was launched; the caller
    waits for the line-up its own way (deadline, the library's errors) and runs the loop again."""


LATE = -1  # launchloop.c's NB_LATE
# How long a gate spins before the loop gives the wait back to the caller: long enough for any rank
# of a healthy job to arrive, short enough that Ctrl-C (seen only between C calls) stays prompt
GATE_LIMIT_S = 1.0


class _Call(ctypes.Structure):
    _fields_ = [("fn", ctypes.c_void_p), ("arg", ctypes.c_uint64 * MAX_ARGS)]


def cache_dir() -> Path:
    """Where the compiled loop lives: $NCCL_BENCH_CACHE, else ~/.cache/nccl_bench."""
    env = os.environ.get("NCCL_BENCH_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nccl_bench"


def _library_path(source: Path) -> Path:
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    return cache_dir() / f"{source.stem}-{platform.machine()}-{digest}.so"


def build(source: Path = SOURCE) -> Path:
    """Compile `source` (launchloop.c, or another C file of ours with no dependency) unless this version is
    already built; returns the library's path. Raises OSError (no compiler, compiler failed) with one line
    that says why."""
    if platform.machine().lower() not in ARCHES:
        raise OSError(f"the compiled loop supports {', '.join(ARCHES)}, not {platform.machine()}")
    out = _library_path(source)
    if out.exists():
        return out
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise OSError("no C compiler (set CC, or install gcc)")
    out.parent.mkdir(parents=True, exist_ok=True)
    # ranks may build at once: each compiles to its own file, the rename is atomic
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", tmp, str(source)], capture_output=True,
                           text=True, timeout=120)
        if r.returncode != 0:
            first = (r.stderr.strip().splitlines() or ["?"])[0]
            raise OSError(f"{cc} failed on {source.name}: {first}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


_LIB: list = []  # [(ctypes function or None, why not)] once loaded
_HANDLE: list = []  # [the loaded library] once loaded


def compiled():
    """(nb_run, None) when the compiled loop can be used, else (None, the reason)."""
    if not _LIB and os.environ.get("NCCL_BENCH_LAUNCH") == "python":
        _LIB.append((None, "NCCL_BENCH_LAUNCH=python"))
    if not _LIB:
        try:
            lib = ctypes.CDLL(str(build()))  # CDLL: the GIL is released while the loop runs
            fn = lib.nb_run
            call = ctypes.POINTER(_Call)
            fn.argtypes = [call, ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_long, call, call, call,
                           ctypes.c_long, ctypes.POINTER(ctypes.c_long), ctypes.POINTER(ctypes.c_int64),
                           ctypes.POINTER(ctypes.c_int64)]
            fn.restype = ctypes.c_int
            _HANDLE.append(lib)
            _LIB.append((fn, None))
        except OSError as e:
            _LIB.append((None, str(e)))
    return _LIB[0]


Call = tuple  # (function pointer: int, args: tuple of ints)


def stamps(marks: int):
    """Room for a loop's host clock stamps (ns): one as its launches begin, one after each of `marks`
    marks. run(..., stamps=) fills it; list(it) reads it; stamp_seconds() turns it into durations."""
    return (ctypes.c_int64 * (marks + 1))()


def stamp_seconds(filled) -> list[float]:
    """Seconds between consecutive stamps: the host's time over each marked iteration."""
    v = list(filled)
    return [(b - a) / 1e9 for a, b in zip(v, v[1:])]


def _calls(calls: Sequence[Call]):
    """A C array of nb_call from (function pointer, integer args) pairs."""
    out = (_Call * len(calls))()
    for slot, (ptr, args) in zip(out, calls):
        if len(args) > MAX_ARGS:
            raise ValueError(f"a call takes at most {MAX_ARGS} arguments")
        slot.fn = ptr
        for k, a in enumerate(args):
            slot.arg[k] = int(a) & 0xFFFFFFFFFFFFFFFF  # ints (e.g. a root of -1) as two's complement
    return out


def _symbol(name: str) -> int:
    """The address of one of launchloop.c's own functions (the library is loaded: compiled() ran)."""
    return ctypes.cast(getattr(_HANDLE[0], name), ctypes.c_void_p).value


def memcpy_address() -> int:
    """The CUDA driver's cuMemcpyAsync(dst, src, bytes, stream), for the compiled loop: a local copy on the copy
    engine, as nccl-tests' cudaMemcpyAsync."""
    return cudadriver.address("cuMemcpyAsync")


def memcpy(dst: int, src: int, nbytes: int, stream: int) -> None:
    """One local copy on `stream` (the Python loop's; the compiled loop calls memcpy_address())."""
    try:
        cudadriver.call("cuMemcpyAsync", dst, src, nbytes, stream)
    except cudadriver.CudaError as e:
        from nccl_bench.core.errors import CommError
        raise CommError("exchange", "cuMemcpyAsync failed", str(e)) from None


class CompiledLoop:
    """`steps` iterations' calls, each a list of (function pointer, integer args), run in C."""

    kind = "compiled"

    def __init__(self, steps: Sequence[Sequence[Call]]):
        fn, why = compiled()
        if fn is None:
            raise OSError(why)
        per_iter = len(steps[0])
        if any(len(s) != per_iter for s in steps):
            raise ValueError("every step must make the same number of calls")
        self._calls = _calls([c for s in steps for c in s])
        self._run, self._per_iter, self._steps = fn, per_iter, len(steps)
        self._failed, self._ns = ctypes.c_long(0), ctypes.c_int64(0)

    @staticmethod
    def record(event, stream) -> Call:
        """A hook recording torch.cuda.Event `event` on torch.cuda.Stream `stream`, from C."""
        if not event.cuda_event:
            event.record(stream)  # torch makes the CUDA event at its first record
        return cudadriver.address("cuEventRecord"), (event.cuda_event, stream.cuda_stream)

    @staticmethod
    def gate(event) -> Call:
        """A hook that spins until torch.cuda.Event `event` (made: recorded once) is done, from C: a
        line-up's exit right before the first launch. A gate not open within GATE_LIMIT_S makes run()
        raise Late before anything is launched."""
        return _symbol("nb_spin"), (cudadriver.address("cuEventQuery"), event.cuda_event, int(GATE_LIMIT_S * 1e9))

    @staticmethod
    def hook(call: Call | Sequence[Call]):
        """A hook made ready for run() ahead of time (a C array), so nothing is converted between a
        timed loop's sync launch and its first launch; a list of calls makes one hook that makes them
        in order. hooks() does the same for a list of marks (one call each)."""
        if isinstance(call, list):
            inner = _calls(call)
            head = _calls([(_symbol("nb_seq"), (ctypes.addressof(inner), len(call)))])
            head.keep = inner  # the calls live as long as the hook
            return head
        return _calls([call])

    @staticmethod
    def hooks(calls: Sequence[Call]):
        return _calls(list(calls)) if calls else None

    def run(self, first: int, n: int, before: Call | None = None, after: Call | None = None,
            marks: Sequence[Call] | None = None, mark_every: int = 1, stamps=None) -> float:
        ready = lambda c: c if c is None or isinstance(c, ctypes.Array) else _calls([c])  # noqa: E731
        marks = marks if marks is None or isinstance(marks, ctypes.Array) else self.hooks(marks)
        rc = self._run(self._calls, self._per_iter, self._steps, first, n, ready(before), ready(after),
                       marks, mark_every, ctypes.byref(self._failed), ctypes.byref(self._ns), stamps)
        if rc == LATE and self._failed.value == -1:
            raise Late()
        if rc != 0:
            raise LoopError(rc, self._failed.value)
        return self._ns.value / 1e9


class PythonLoop:
    """The same loop over zero-argument Python launchers (any backend; the fallback)."""

    kind = "python"

    def __init__(self, launches: Sequence[Callable[[], None]]):
        self._launches = list(launches)

    @staticmethod
    def record(event, stream) -> Callable[[], None]:
        return lambda: event.record(stream)

    @staticmethod
    def gate(event) -> Callable[[], None]:
        def spin():
            end = time.perf_counter() + GATE_LIMIT_S
            while not event.query():
                if time.perf_counter() > end:
                    raise Late()
        return spin

    @staticmethod
    def hook(call: Callable[[], None] | Sequence[Callable[[], None]]) -> Callable[[], None]:
        if not isinstance(call, list):
            return call
        calls = list(call)

        def in_order():
            for c in calls:
                c()
        return in_order

    @staticmethod
    def hooks(calls: Sequence[Callable[[], None]]):
        return list(calls)

    def run(self, first: int, n: int, before: Callable[[], None] | None = None,
            after: Callable[[], None] | None = None, marks: Sequence[Callable[[], None]] | None = None,
            mark_every: int = 1, stamps=None) -> float:
        launches, steps = self._launches, len(self._launches)
        if before:
            before()
        t0 = time.perf_counter()
        if marks:
            clock = time.monotonic_ns
            if stamps is not None:
                stamps[0] = clock()
            for i in range(first, first + n):
                launches[i % steps]()
                if (i - first + 1) % mark_every == 0:
                    marks[(i - first) // mark_every]()
                    if stamps is not None:
                        stamps[(i - first) // mark_every + 1] = clock()
        else:  # the plain loop: nothing but the launches between two launches
            for i in range(first, first + n):
                launches[i % steps]()
        host = time.perf_counter() - t0
        if after:
            after()
        return host


def main() -> int:
    """`python -m nccl_bench.comm.launchloop`: build the compiled loop and the algorithm recorder now (bin/setup
    calls this; else each is built at its first use)."""
    try:
        print(f"compiled launch loop: {build()}")
    except OSError as e:
        print(f"compiled launch loop not built ({e}); timed loops will run in Python", file=sys.stderr)
    recorder = SOURCE.with_name("algorecorder.c")
    try:
        print(f"algorithm recorder (a NCCL profiler plugin): {build(recorder)}")
    except OSError as e:
        print(f"algorithm recorder not built ({e}); bench will not confirm NCCL's algorithm", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
