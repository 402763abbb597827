"""Device arrays without torch: a one-dimensional run of elements in GPU memory with the part of a tensor's
interface the sweep uses (slices, numel, element_size, data_ptr, zero_, fill_, item), on the CUDA driver of
nccl_bench.core.cudadriver."""
from __future__ import annotations

import ctypes
from typing import Callable

from nccl_bench.core.cudadriver import Gpu, call
from nccl_bench.core.dtypes import ELEMENT_BYTES


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
        call("cuMemsetD8Async", self.data_ptr(), 0, self._numel * self.element_size(), self.gpu.current.cuda_stream)
        return self

    def fill_(self, value: float) -> "DeviceArray":
        """Every element set to `value` (a small array: a vote, a token), through the host."""
        data = _host(self.dtype, [value] * self._numel)
        call("cuMemcpyHtoDAsync", self.data_ptr(), ctypes.addressof(data), ctypes.sizeof(data),
             self.gpu.current.cuda_stream)
        self.gpu.current.synchronize()  # `data` lives until the copy read it
        return self

    def item(self) -> float:
        """The first element's value, after the current stream's work."""
        data = _host(self.dtype, [0])
        self.gpu.current.synchronize()
        call("cuMemcpyDtoH", ctypes.addressof(data), self.data_ptr(), ctypes.sizeof(data))
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
