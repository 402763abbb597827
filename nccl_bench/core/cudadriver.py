"""A GPU without torch: the CUDA driver (libcuda, through ctypes) for what a `--backend nccl` bench rank
needs: a device's primary context, streams, timing events, and device arrays with the part of a tensor's
interface the sweep uses (slices, numel, element_size, data_ptr, zero_, fill_, item), without importing
torch before the first row (docs/validation.md has what that cost). Memory comes from the caller's
allocator (the nccl backend's is ncclMemAlloc, as nccl-tests allocates).

Every call runs in this process's current context (`Gpu.use`), which the CUDA runtime inside NCCL adopts
as its current device, as cudaSetDevice would have made it.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import threading
from dataclasses import dataclass
from typing import Callable

from nccl_bench.core import launch
from nccl_bench.core.dtypes import ELEMENT_BYTES
from nccl_bench.core.startmarks import mark

_LIB: list = []
_CU_EVENT_DISABLE_TIMING = 0x2
_CU_STREAM_NON_BLOCKING = 0x1
_NOT_READY = 600  # CUDA_ERROR_NOT_READY
_NOT_INITIALIZED = 3  # CUDA_ERROR_NOT_INITIALIZED
_PCI = {"domain": 50, "bus": 33, "device": 34}  # CU_DEVICE_ATTRIBUTE_PCI_{DOMAIN,BUS,DEVICE}_ID


class CudaError(RuntimeError):
    """A driver call failed: its name and the driver's error name."""


def lib():
    """The CUDA driver library: this module is the only one that opens it; others ask it for what they need."""
    if not _LIB:
        _LIB.append(ctypes.CDLL("libcuda.so.1"))
    return _LIB[0]


def address(name: str) -> int:
    """A driver function's address, for compiled code that calls it (comm.launchloop)."""
    return ctypes.cast(getattr(lib(), name), ctypes.c_void_p).value


def function(name: str, restype, *argtypes):
    """A driver function as a ctypes function of its own prototype (the library's shared attribute untouched)."""
    return ctypes.CFUNCTYPE(restype, *argtypes)((name, lib()))


def visible_count() -> int:
    """The GPUs the driver shows this process (CUDA_VISIBLE_DEVICES honoured); 0 where there is no driver."""
    try:
        return device_count()
    except (OSError, AttributeError, CudaError):
        return 0


def initialised_here() -> bool:
    """Whether this process initialised CUDA, which a fork does not survive: libcuda mapped is not enough (NVML
    maps it), its cuCtxGetCurrent must not answer CUDA_ERROR_NOT_INITIALIZED. Opens nothing not yet mapped."""
    from nccl_bench.core.sysinfo import mapped_lib
    if mapped_lib("libcuda.so") is None:
        return False
    try:
        return lib().cuCtxGetCurrent(ctypes.byref(ctypes.c_void_p())) != _NOT_INITIALIZED
    except (OSError, AttributeError):
        return True  # not known: the warm server, which never loads CUDA itself


def call(name: str, *args) -> None:
    rc = getattr(lib(), name)(*args)
    if rc:
        text = ctypes.c_char_p()
        lib().cuGetErrorName(rc, ctypes.byref(text))
        raise CudaError(f"{name}: {(text.value or b'?').decode()} ({rc})")


@dataclass(frozen=True)
class Device:
    """What a tensor's .device tells the sweep: its type and index."""

    index: int
    type: str = "cuda"


class Gpu:
    """One device's primary context, made current in this thread by use()."""

    def __init__(self, index: int):
        call("cuInit", 0)
        self.device = Device(index)
        self._dev = ctypes.c_int()
        call("cuDeviceGet", ctypes.byref(self._dev), index)
        self._ctx = ctypes.c_void_p()
        call("cuDevicePrimaryCtxRetain", ctypes.byref(self._ctx), self._dev)
        self.use()
        self.current = Stream(0)  # the legacy default stream until a caller picks another (on_stream)
        mark("cuda")

    def use(self) -> None:
        call("cuCtxSetCurrent", self._ctx)

    @contextlib.contextmanager
    def on_stream(self, stream: "Stream"):
        """Arrays' own work (zero_, fill_) and launches that name no stream go to `stream` meanwhile."""
        previous, self.current = self.current, stream
        try:
            yield
        finally:
            self.current = previous

    def name(self) -> str:
        buf = ctypes.create_string_buffer(256)
        call("cuDeviceGetName", buf, 256, self._dev)
        return buf.value.decode(errors="replace")

    def attribute(self, attr: int) -> int:
        """A CUdevice_attribute's value."""
        v = ctypes.c_int()
        call("cuDeviceGetAttribute", ctypes.byref(v), attr, self._dev)
        return v.value

    def pci(self) -> tuple[int, int, int]:
        return tuple(self.attribute(a) for a in _PCI.values())

    def arch(self) -> str:
        """sm_XY, from the compute capability."""
        return f"sm_{self.attribute(75)}{self.attribute(76)}"  # COMPUTE_CAPABILITY_MAJOR, _MINOR

    def new_stream(self) -> "Stream":
        handle = ctypes.c_void_p()
        call("cuStreamCreate", ctypes.byref(handle), _CU_STREAM_NON_BLOCKING)
        return Stream(handle.value or 0, owned=True)

    def new_event(self, enable_timing: bool = False) -> "Event":
        return Event(enable_timing)


def mem_alloc(nbytes: int) -> int:
    """cuMemAlloc in the current context (an allocator for DeviceArray.allocate where NCCL's is not wanted)."""
    ptr = ctypes.c_uint64()
    call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(nbytes))
    return ptr.value


def mem_free(ptr: int) -> None:
    if _LIB:
        lib().cuMemFree_v2(ctypes.c_uint64(ptr))


_GPUS: dict[int, Gpu] = {}
_MAKING = threading.Lock()


def gpu(index: int) -> Gpu:
    """Device `index`'s Gpu, one per process, made current in the calling thread (a context is current
    per thread); one that init_early() is still making is waited for."""
    with _MAKING:
        if index not in _GPUS:
            _GPUS[index] = Gpu(index)
    _GPUS[index].use()
    return _GPUS[index]


def local_gpu(local_rank: int) -> Gpu:
    """The GPU of a node's `local_rank`-th rank, as every backend places ranks: local rank modulo GPUs."""
    return gpu(launch.local_device(local_rank, device_count()))


def init_early(local_rank: int) -> None:
    """Start CUDA (cuInit, the primary context) for `local_rank` in a thread, while this thread goes on
    importing NCCL's bindings; a driver call releases the interpreter's lock meanwhile. Whatever fails there
    is raised again where the GPU is asked for (gpu()). A process that ends before CUDA has started waits for
    it first (atexit): the driver is not torn down mid-cuInit.
    (Handing the lock over every 0.5 ms instead of 5 ms made CUDA's start slower with two ranks: docs/validation.md.)"""
    def make():
        try:
            local_gpu(local_rank)
        except Exception:  # the caller's own gpu() call meets it again and says it
            pass
    mark("cuda-start")
    thread = threading.Thread(target=make, name="nb-cuda-init", daemon=True)
    thread.start()
    atexit.register(thread.join, EXIT_WAIT_S)


EXIT_WAIT_S = 30.0


def device_count() -> int:
    call("cuInit", 0)
    n = ctypes.c_int()
    call("cuDeviceGetCount", ctypes.byref(n))
    return n.value


class Stream:
    """A CUDA stream by its handle (`cuda_stream`, as torch names it); 0 is the legacy default stream."""

    def __init__(self, handle: int, owned: bool = False):
        self.cuda_stream, self._owned = handle, owned

    def synchronize(self) -> None:
        call("cuStreamSynchronize", ctypes.c_void_p(self.cuda_stream))

    def __del__(self):
        if self._owned and _LIB:
            lib().cuStreamDestroy_v2(ctypes.c_void_p(self.cuda_stream))


class Event:
    """A CUDA event with torch.cuda.Event's calls: record, query, synchronize, elapsed_time (ms); made at
    once, so `cuda_event` is its handle from the start."""

    def __init__(self, enable_timing: bool = False):
        handle = ctypes.c_void_p()
        call("cuEventCreate", ctypes.byref(handle), 0 if enable_timing else _CU_EVENT_DISABLE_TIMING)
        self.cuda_event = handle.value

    def record(self, stream: Stream) -> None:
        call("cuEventRecord", ctypes.c_void_p(self.cuda_event), ctypes.c_void_p(stream.cuda_stream))

    def query(self) -> bool:
        rc = lib().cuEventQuery(ctypes.c_void_p(self.cuda_event))
        if rc not in (0, _NOT_READY):
            call("cuEventQuery", ctypes.c_void_p(self.cuda_event))  # raises, naming the error
        return rc == 0

    def synchronize(self) -> None:
        call("cuEventSynchronize", ctypes.c_void_p(self.cuda_event))

    def elapsed_time(self, end: "Event") -> float:
        ms = ctypes.c_float()
        call("cuEventElapsedTime", ctypes.byref(ms), ctypes.c_void_p(self.cuda_event), ctypes.c_void_p(end.cuda_event))
        return ms.value

    def __del__(self):
        if self.cuda_event and _LIB:
            lib().cuEventDestroy_v2(ctypes.c_void_p(self.cuda_event))


class _Memory:
    """One allocation, freed by `free` when the last array on it goes."""

    def __init__(self, ptr: int, free: Callable[[int], None]):
        self.ptr, self._free = ptr, free

    def __del__(self):
        if self.ptr:
            self._free(self.ptr)
            self.ptr = 0


class DeviceArray:
    """A one-dimensional run of `numel` elements of `dtype` (torch's dtype name) at `ptr` on `gpu`,
    holding its allocation alive; slicing makes views, as a tensor's does."""

    def __init__(self, gpu: Gpu, memory: _Memory, offset: int, numel: int, dtype: str):
        self.gpu, self._memory, self._offset, self._numel, self.dtype = gpu, memory, offset, numel, dtype
        self.device = gpu.device

    @classmethod
    def allocate(cls, gpu: Gpu, numel: int, dtype: str, alloc: Callable[[int], int],
                 free: Callable[[int], None]) -> "DeviceArray":
        """A zeroed array from `alloc(bytes) -> pointer` (its memory given back by `free(pointer)`)."""
        nbytes = max(numel, 1) * ELEMENT_BYTES[dtype]
        out = cls(gpu, _Memory(int(alloc(nbytes)), free), 0, numel, dtype)
        out.zero_()
        return out

    def element_size(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    def numel(self) -> int:
        return self._numel

    def data_ptr(self) -> int:
        return self._memory.ptr + self._offset * ELEMENT_BYTES[self.dtype]

    def __getitem__(self, key: slice) -> "DeviceArray":
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a DeviceArray is sliced by a plain slice only")
        start, stop, _ = key.indices(self._numel)
        return DeviceArray(self.gpu, self._memory, self._offset + start, max(stop - start, 0), self.dtype)

    def zero_(self) -> "DeviceArray":
        call("cuMemsetD8Async", ctypes.c_uint64(self.data_ptr()), ctypes.c_ubyte(0),
             ctypes.c_size_t(self._numel * self.element_size()), ctypes.c_void_p(self.gpu.current.cuda_stream))
        return self

    def fill_(self, value: float) -> "DeviceArray":
        """Every element set to `value` (a small array: a vote, a token), through the host."""
        data = _host(self.dtype, [value] * self._numel)
        call("cuMemcpyHtoDAsync_v2", ctypes.c_uint64(self.data_ptr()), data, ctypes.c_size_t(ctypes.sizeof(data)),
             ctypes.c_void_p(self.gpu.current.cuda_stream))
        self.gpu.current.synchronize()  # `data` lives until the copy read it
        return self

    def item(self) -> float:
        """The first element's value, after the current stream's work."""
        data = _host(self.dtype, [0])
        self.gpu.current.synchronize()
        call("cuMemcpyDtoH_v2", data, ctypes.c_uint64(self.data_ptr()), ctypes.c_size_t(ctypes.sizeof(data)))
        return _value(self.dtype, data)


_CTYPES = {"int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
           "float32": ctypes.c_float, "float64": ctypes.c_double}


def _host(dtype: str, values: list[float]):
    """Host copies of `values` as `dtype`'s bits (16-bit floats through numpy's float16 and float32's top half)."""
    if dtype in _CTYPES:
        return (_CTYPES[dtype] * len(values))(*values)
    import numpy as np
    bits = (np.asarray(values, np.float16).view(np.uint16) if dtype == "float16"
            else (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16))
    return (ctypes.c_uint16 * len(values))(*bits.tolist())


def _value(dtype: str, data) -> float:
    if dtype in _CTYPES:
        return data[0]
    import numpy as np
    bits = np.asarray([data[0]], np.uint16)
    return float(bits.view(np.float16)[0] if dtype == "float16"
                 else (bits.astype(np.uint32) << 16).view(np.float32)[0])
