"""A GPU without torch: the CUDA driver and NVRTC through NVIDIA's own bindings (`cuda.bindings`, installed
with nccl4py[cu13], which a `--backend nccl` rank imports anyway) for what such a rank needs: a device's primary
context, streams, timing events, device arrays with the part of a tensor's interface the sweep uses (slices,
numel, element_size, data_ptr, zero_, fill_, item), and compiled kernels, without importing torch before the
first row (docs/validation.md has what that cost). Memory comes from the caller's allocator (the nccl backend's
is ncclMemAlloc, as nccl-tests allocates).

This is the one module that talks to libcuda and NVRTC: the others ask it (a count, an address, a Gpu). Every
call runs in this process's current context (`Gpu.use`), which the CUDA runtime inside NCCL adopts as its
current device, as cudaSetDevice would have made it. Handles travel as ints (`cuda_stream`, `cuda_event`, as
torch names them); the bindings take them as they are.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import threading
from dataclasses import dataclass

from nccl_bench.core import launch
from nccl_bench.core.errors import UsageError
from nccl_bench.core.startmarks import mark

_BINDINGS: dict = {}
INSTALL_HINT = "pip install 'nccl4py[cu13]' (or cuda-bindings)"


class CudaError(RuntimeError):
    """A driver or NVRTC call failed: its name and the library's error name."""


def driver():
    """`cuda.bindings.driver`, imported when first asked (a command's driver process rarely needs it). Its
    first call opens libcuda; where there is none that call raises RuntimeError, which call() says."""
    if "driver" not in _BINDINGS:
        try:
            from cuda.bindings import driver as d
        except ImportError as e:
            raise CudaError(f"NVIDIA's CUDA bindings are not installed ({e}): {INSTALL_HINT}") from None
        _BINDINGS["driver"] = d
    return _BINDINGS["driver"]


def call(name: str, *args):
    """driver.<name>(*args) with its CUresult checked: what the call returns beside it (None, one value, or a
    tuple). Ints are taken for every handle and pointer."""
    d = driver()
    try:
        err, *out = getattr(d, name)(*args)
    except RuntimeError as e:  # no CUDA driver library on this machine for the bindings to load
        raise CudaError(f"{name}: {e}") from None
    if err != d.CUresult.CUDA_SUCCESS:
        raise CudaError(f"{name}: {_error_name(err)} ({int(err)})")
    return None if not out else out[0] if len(out) == 1 else tuple(out)


def _error_name(err) -> str:
    try:
        got, text = driver().cuGetErrorName(err)
        return text.decode() if got == driver().CUresult.CUDA_SUCCESS else getattr(err, "name", "?")
    except Exception:  # naming an error must never hide it
        return getattr(err, "name", "?")


@functools.cache
def address(name: str) -> int:
    """A driver function's address (the legacy default stream's variant, as its plain symbol in libcuda), for
    compiled code that calls it (comm.launchloop)."""
    d = driver()
    pfn, status = call("cuGetProcAddress", name.encode(), call("cuDriverGetVersion"),
                       d.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_LEGACY_STREAM)
    if status != d.CUdriverProcAddressQueryResult.CU_GET_PROC_ADDRESS_SUCCESS or not int(pfn):
        raise CudaError(f"cuGetProcAddress: the driver has no {name} ({getattr(status, 'name', status)})")
    return int(pfn)


def visible_count() -> int:
    """The GPUs the driver shows this process (CUDA_VISIBLE_DEVICES honoured); 0 where there is no driver.
    CudaError where the bindings are not installed: the caller counts another way."""
    driver()
    try:
        return device_count()
    except CudaError:
        return 0


def fork_safe() -> bool:
    """Whether ranks forked from this process may start CUDA and NCCL: no NVIDIA driver library is loaded here.
    Whatever initialised CUDA (this module, torch) loaded libcuda; and NVML does not survive a fork either: ranks
    forked from a launcher that had asked NVML for the GPUs' memory (a sweep over 1 GiB) crashed in NCCL's init
    (docs/validation.md)."""
    from nccl_bench.core.sysinfo import mapped_lib
    return not any(mapped_lib(name) for name in ("libcuda.so", "libnvidia-ml.so"))


def device_count() -> int:
    call("cuInit", 0)
    return call("cuDeviceGetCount")


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
        self._dev = call("cuDeviceGet", index)
        self._ctx = call("cuDevicePrimaryCtxRetain", self._dev)
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
        return call("cuDeviceGetName", 256, self._dev).split(b"\0", 1)[0].decode(errors="replace")

    def attribute(self, name: str) -> int:
        """A CUdevice_attribute's value, by its name less CU_DEVICE_ATTRIBUTE_ (PCI_BUS_ID, ...)."""
        return call("cuDeviceGetAttribute", getattr(driver().CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}"),
                    self._dev)

    def pci(self) -> tuple[int, int, int]:
        return tuple(self.attribute(f"PCI_{part}_ID") for part in ("DOMAIN", "BUS", "DEVICE"))

    def arch(self) -> str:
        """sm_XY, from the compute capability."""
        return f"sm_{self.attribute('COMPUTE_CAPABILITY_MAJOR')}{self.attribute('COMPUTE_CAPABILITY_MINOR')}"

    def new_stream(self) -> "Stream":
        handle = call("cuStreamCreate", driver().CUstream_flags.CU_STREAM_NON_BLOCKING)
        return Stream(int(handle), owned=True)

    def new_event(self, enable_timing: bool = False) -> "Event":
        return Event(enable_timing)


def mem_alloc(nbytes: int) -> int:
    """cuMemAlloc in the current context (an allocator for DeviceArray.allocate where NCCL's is not wanted)."""
    return int(call("cuMemAlloc", nbytes))


def mem_free(ptr: int) -> None:
    _quietly("cuMemFree", ptr)


def copy(dst: int, src: int, nbytes: int) -> None:
    """A copy between any two pointers of this process (unified addressing), done when it returns."""
    call("cuMemcpy", dst, src, nbytes)


def _quietly(name: str, *args) -> None:
    """A release from a destructor: nothing to say if it fails, and at exit the bindings may be gone."""
    if "driver" in _BINDINGS:
        with contextlib.suppress(Exception):
            getattr(_BINDINGS["driver"], name)(*args)


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


class Stream:
    """A CUDA stream by its handle (`cuda_stream`, as torch names it); 0 is the legacy default stream."""

    def __init__(self, handle: int, owned: bool = False):
        self.cuda_stream, self._owned = handle, owned

    def synchronize(self) -> None:
        call("cuStreamSynchronize", self.cuda_stream)

    def __del__(self):
        if self._owned:
            _quietly("cuStreamDestroy", self.cuda_stream)


class Event:
    """A CUDA event with torch.cuda.Event's calls: record, query, synchronize, elapsed_time (ms); made at
    once, so `cuda_event` is its handle from the start."""

    def __init__(self, enable_timing: bool = False):
        flags = driver().CUevent_flags
        self.cuda_event = int(call("cuEventCreate", flags.CU_EVENT_DEFAULT if enable_timing
                                   else flags.CU_EVENT_DISABLE_TIMING))

    def record(self, stream: Stream) -> None:
        call("cuEventRecord", self.cuda_event, stream.cuda_stream)

    def query(self) -> bool:
        d = driver()
        err = d.cuEventQuery(self.cuda_event)[0]
        if err not in (d.CUresult.CUDA_SUCCESS, d.CUresult.CUDA_ERROR_NOT_READY):
            call("cuEventQuery", self.cuda_event)  # raises, naming the error
        return err == d.CUresult.CUDA_SUCCESS

    def synchronize(self) -> None:
        call("cuEventSynchronize", self.cuda_event)

    def elapsed_time(self, end: "Event") -> float:
        return call("cuEventElapsedTime", self.cuda_event, end.cuda_event)

    def __del__(self):
        if getattr(self, "cuda_event", 0):
            _quietly("cuEventDestroy", self.cuda_event)


class Module:
    """A compiled image (a cubin) loaded in the current context; its kernels launched by name."""

    def __init__(self, image: bytes):
        data = ctypes.create_string_buffer(image, len(image))
        self._handle = call("cuModuleLoadData", ctypes.addressof(data))
        self._functions: dict[str, object] = {}

    def launch(self, name: str, blocks: int, threads: int, stream: int, *args) -> None:
        """Kernel `name` on `blocks` x `threads` in `stream`; `args` are ctypes values in the kernel's order."""
        if name not in self._functions:
            self._functions[name] = call("cuModuleGetFunction", self._handle, name.encode())
        params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        call("cuLaunchKernel", self._functions[name], blocks, 1, 1, threads, 1, 1, 0, stream,
             ctypes.addressof(params), 0)


def _nvrtc():
    """`cuda.bindings.nvrtc`, which finds libnvrtc itself (the system's, or a CUDA wheel's: torch's, or
    nvidia-cuda-nvrtc); bad input (exit 2, one line) where there is none."""
    if "nvrtc" not in _BINDINGS:
        try:
            from cuda.bindings import nvrtc
            nvrtc.nvrtcVersion()
        except Exception as e:  # ImportError, or cuda.pathfinder's library-not-found
            raise UsageError(f"compiling a kernel needs NVRTC and none was found ({str(e)[:120]}): install CUDA's "
                             f"or `pip install nvidia-cuda-nvrtc`") from None
        _BINDINGS["nvrtc"] = nvrtc
    return _BINDINGS["nvrtc"]


def _nvrtc_call(name: str, *args):
    nv = _nvrtc()
    err, *out = getattr(nv, name)(*args)
    if err != nv.nvrtcResult.NVRTC_SUCCESS:
        raise CudaError(f"{name}: {getattr(err, 'name', err)}")
    return out[0] if out else None


def compile_cubin(source: str, filename: str, arch: str) -> bytes:
    """`source` (CUDA C++) compiled by NVRTC for `arch` (sm_XY) into a cubin; CudaError with the compiler's
    log where it fails."""
    prog = _nvrtc_call("nvrtcCreateProgram", source.encode(), filename.encode(), 0, [], [])
    try:
        options = [f"--gpu-architecture={arch}".encode(), b"-std=c++14"]
        try:
            _nvrtc_call("nvrtcCompileProgram", prog, len(options), options)
        except CudaError as e:
            log = _buffer(_nvrtc_call("nvrtcGetProgramLogSize", prog))
            _nvrtc_call("nvrtcGetProgramLog", prog, log)
            said = log.rstrip(b"\0 ").decode(errors="replace").strip()[:300]
            raise CudaError(f"NVRTC could not compile {filename} for {arch}: {said or e}") from None
        cubin = _buffer(_nvrtc_call("nvrtcGetCUBINSize", prog))
        _nvrtc_call("nvrtcGetCUBIN", prog, cubin)
        return cubin
    finally:
        with contextlib.suppress(Exception):
            _nvrtc().nvrtcDestroyProgram(prog)


def _buffer(size: int) -> bytes:
    """A bytes object NVRTC writes into (the bindings' way): never one of Python's shared one-byte objects."""
    return b" " * max(size, 2)
