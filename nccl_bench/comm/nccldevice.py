"""A nccl communicator's buffers, streams and events: torch's, or, where the rank loads no torch
(InitPlan.torch_free), the CUDA driver's own (nccl_bench.core.cudadriver) with the same calls. Either way the
NCCL calls get raw pointers, counts and types (`_buffer`), and the stream that names no other (`_current_stream`).
"""
from __future__ import annotations

# ncclDataType_t by torch's dtype name (NCCL's ABI: nccl.h), for arrays of the CUDA driver's own
NCCL_TYPES = {"int8": 0, "uint8": 1, "int32": 2, "int64": 4, "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}


class DeviceSide:
    """Mixed into NcclCommunicator: `gpu` is the device's cudadriver.Gpu on a rank without torch, else None."""

    gpu = None

    def alloc(self, numel: int, dtype):
        """ncclMemAlloc'd memory, as nccl-tests (>= 2.19) allocates its buffers: cuMem-backed, so NCCL
        can register it, e.g. for collectives captured in CUDA graphs. Freed with the tensor (or array)."""
        if self.gpu is not None:
            from nccl_bench.core.devicearray import DeviceArray
            name = dtype if isinstance(dtype, str) else str(dtype).rsplit(".", 1)[-1]
            return DeviceArray.allocate(self.gpu, numel, name, self.nb.mem_alloc, self.nb.mem_free)
        import torch
        from nccl.core.interop.torch import empty
        dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        return empty(numel, dtype=dtype, device=self.device).zero_()

    # --- streams and events: the driver's own for a rank without torch --------------------
    def new_stream(self):
        return self.gpu.new_stream() if self.gpu is not None else super().new_stream()

    def new_event(self, enable_timing: bool = False):
        return self.gpu.new_event(enable_timing) if self.gpu is not None else super().new_event(enable_timing)

    def on_stream(self, stream):
        return self.gpu.on_stream(stream) if self.gpu is not None else super().on_stream(stream)

    def _current_stream(self):
        if self.gpu is not None:
            return self.gpu.current
        import torch
        return torch.cuda.current_stream(self.device)

    def _buffer(self, t) -> tuple[int, int, int]:
        """(pointer, ncclDataType_t, count) of a tensor or an array of the driver's own."""
        if self.gpu is not None:
            return t.data_ptr(), NCCL_TYPES[t.dtype], t.numel()
        from nccl.core.buffer import NcclBuffer
        b = NcclBuffer(t)
        return b.ptr, int(b.dtype), int(b.count)
