"""The data check on the GPU without torch: nccl_bench.measure.datacheck's pattern and expected results as
CUDA kernels (fill, and count the elements that differ), as nccl-tests has kernels of its own. Compiled by
NVRTC once per GPU architecture and source into the cache folder (the compiled launch loop's), then
loaded from there; the values are datacheck's, element for element.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import sys

from nccl_bench.comm.launchloop import cache_dir
from nccl_bench.core import cudadriver
from nccl_bench.core.devicearray import DeviceArray
from nccl_bench.core.errors import UsageError
from nccl_bench.measure.collectives import Segment

OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4}
_BLOCK = 256
_MAX_BLOCKS = 4096

SOURCE = r"""
typedef long long i64;
typedef unsigned long long u64;

__device__ __forceinline__ i64 pattern(i64 i, int rank, int op, int nranks) {
  if (op == 1) return 1 + ((i % nranks) == rank ? 1 : 0);  /* prod: one rank gives 2 */
  return (i * 31 + (i / 23) * 7 + (i64)rank * 13) % 23 + 1;
}
__device__ __forceinline__ i64 reduced(i64 i, int op, int nranks) {
  i64 acc = pattern(i, 0, op, nranks);
  for (int r = 1; r < nranks; ++r) {
    i64 x = pattern(i, r, op, nranks);
    if (op == 0 || op == 4) acc += x; else if (op == 1) acc *= x;
    else if (op == 2) acc = x < acc ? x : acc; else acc = x > acc ? x : acc;
  }
  return acc;
}
__device__ __forceinline__ unsigned short f2h(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float h2f(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short f2bf(float f) {  /* round to nearest even */
  unsigned int u = __float_as_uint(f); u += 0x7fffu + ((u >> 16) & 1u); return (unsigned short)(u >> 16);
}
__device__ __forceinline__ float bf2f(unsigned short b) { return __uint_as_float(((unsigned int)b) << 16); }

#define KERNELS(NAME, T, TO, FROM, EPS)                                                                  \
extern "C" __global__ void fill_##NAME(T* out, u64 n, u64 start, int rank, int op, int nranks) {          \
  for (u64 k = blockIdx.x * (u64)blockDim.x + threadIdx.x; k < n; k += (u64)gridDim.x * blockDim.x) {   \
    i64 v = pattern((i64)(start + k), rank, op, nranks); out[k] = TO(v);                                \
  }                                                                                                     \
}                                                                                                       \
extern "C" __global__ void check_##NAME(const T* got, u64 n, u64 src, int source, int op, int nranks,     \
                                        u64* wrong) {                                                   \
  u64 bad = 0;                                                                                          \
  for (u64 k = blockIdx.x * (u64)blockDim.x + threadIdx.x; k < n; k += (u64)gridDim.x * blockDim.x) {   \
    i64 i = (i64)(src + k);                                                                             \
    i64 want = source >= 0 ? pattern(i, source, op, nranks) : reduced(i, op, nranks);                   \
    if (op == 4 && source < 0 && EPS > 0.0) {  /* avg: NCCL may pre-scale by 1/n, so within rounding */ \
      double w = (double)want / nranks, g = (double)FROM(got[k]);                                       \
      double d = g - w; if (d < 0) d = -d; double a = w < 0 ? -w : w;                                   \
      if (d > 4.0 * EPS * a + 1e-12) ++bad;                                                             \
    } else {                                                                                            \
      T w = op == 4 && source < 0 ? TO((i64)((double)want / nranks)) : TO(want);                        \
      if (got[k] != w) ++bad;                                                                           \
    }                                                                                                   \
  }                                                                                                     \
  if (bad) atomicAdd(wrong, bad);                                                                       \
}

#define AS(T) (T)
#define H(v) f2h((float)(v))
#define BF(v) f2bf((float)(v))
KERNELS(int8, signed char, AS(signed char), AS(double), 0.0)
KERNELS(uint8, unsigned char, AS(unsigned char), AS(double), 0.0)
KERNELS(int32, int, AS(int), AS(double), 0.0)
KERNELS(int64, i64, AS(i64), AS(double), 0.0)
KERNELS(float32, float, AS(float), AS(double), 1.1920928955078125e-07)
KERNELS(float64, double, AS(double), AS(double), 2.220446049250313e-16)
KERNELS(float16, unsigned short, H, h2f, 9.765625e-04)
KERNELS(bfloat16, unsigned short, BF, bf2f, 7.8125e-03)
"""


def _compile(arch: str) -> bytes:
    try:
        return cudadriver.compile_cubin(SOURCE, "datakernels.cu", arch)
    except UsageError as e:
        raise UsageError(f"the data check's kernels: {e}, or run with -c 0") from None


class Kernels:
    """The fill and check kernels, loaded in `gpu`'s context."""

    def __init__(self, gpu: cudadriver.Gpu):
        self.gpu = gpu
        self._module = cudadriver.Module(self._cached(gpu.arch()))
        self._wrong = cudadriver.mem_alloc(8)  # the count of wrong elements, on the device

    @staticmethod
    def _cached(arch: str) -> bytes:
        digest = hashlib.sha256(SOURCE.encode()).hexdigest()[:12]
        path = cache_dir() / f"datakernels-{arch}-{digest}.cubin"
        try:
            return path.read_bytes()
        except OSError:
            pass
        image = _compile(arch)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}")
            tmp.write_bytes(image)
            os.replace(tmp, path)  # whole or not at all: another rank may read it now
        except OSError:
            pass  # an unwritable cache: compiled again next time
        return image

    def _launch(self, name: str, n: int, *args) -> None:
        blocks = max(1, min(_MAX_BLOCKS, (n + _BLOCK - 1) // _BLOCK))
        self._module.launch(name, blocks, _BLOCK, self.gpu.current.cuda_stream, *args)

    def fill(self, t: DeviceArray, rank: int, op: str, nranks: int) -> None:
        """Rank `rank`'s input into `t`, as datacheck.fill writes it."""
        n = t.numel()
        if n:
            self._launch(f"fill_{t.dtype}", n, ctypes.c_uint64(t.data_ptr()), ctypes.c_uint64(n), ctypes.c_uint64(0),
                         ctypes.c_int(rank), ctypes.c_int(OPS[op]), ctypes.c_int(nranks))

    def count_wrong(self, recv: DeviceArray, segments: list[Segment], op: str, nranks: int, chunk: int) -> int:
        """Elements of `recv` that differ from the expected values, as datacheck.count_wrong counts them, `chunk`
        elements a launch."""
        cudadriver.call("cuMemsetD8Async", self._wrong, 0, 8, self.gpu.current.cuda_stream)
        for seg in segments:
            for a in range(0, seg.length, chunk):
                b = min(a + chunk, seg.length)
                got = recv[seg.out + a: seg.out + b]
                self._launch(f"check_{recv.dtype}", b - a, ctypes.c_uint64(got.data_ptr()), ctypes.c_uint64(b - a),
                             ctypes.c_uint64(seg.src + a), ctypes.c_int(seg.source),
                             ctypes.c_int(OPS[op]), ctypes.c_int(nranks), ctypes.c_uint64(self._wrong))
        out = ctypes.c_uint64()
        self.gpu.current.synchronize()
        cudadriver.call("cuMemcpyDtoH", ctypes.addressof(out), self._wrong, 8)
        return out.value


_LOADED: dict[int, Kernels] = {}


def for_gpu(gpu: cudadriver.Gpu) -> Kernels:
    """The kernels of `gpu`, loaded once per process."""
    if id(gpu) not in _LOADED:
        _LOADED[id(gpu)] = Kernels(gpu)
    return _LOADED[id(gpu)]


def main() -> int:
    """`python -m nccl_bench.measure.datakernels`: the data check's kernels compiled now for each local GPU's
    architecture (bin/setup calls this on a GPU machine; else the first bench of a rank without torch
    compiles them, and its user waits)."""
    try:
        archs = sorted({cudadriver.gpu(i).arch() for i in range(cudadriver.device_count())})
        for arch in archs:
            Kernels._cached(arch)
    except (OSError, cudadriver.CudaError, UsageError) as e:
        print(f"data check kernels not compiled ({e}); the first bench compiles them", file=sys.stderr)
        return 0
    print(f"data check kernels: {', '.join(archs) or 'no GPU'} in {cache_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
