"""Start-up probe (tests/gpu/earlycuda.sh), on PYTHONPATH only there: with EARLY_CUDA set, a rank starts CUDA in
a thread at Python's first line (before any import of ours), as nccl-tests starts it at its first line; with
EARLY_CUDA=ext it first imports the C extensions our imports up to the job store load. Each step's time goes to
EARLY_CUDA_LOG, so that where the main thread waits while CUDA starts can be read beside the start marks."""
import os

if os.environ.get("EARLY_CUDA"):
    import ctypes
    import threading
    import time

    def _note(what: str) -> None:
        with open(os.environ["EARLY_CUDA_LOG"], "a") as f:
            f.write(f"{os.getpid()} {os.environ.get('PMI_RANK', '-')} {what} {time.time():.6f}\n")

    if os.environ["EARLY_CUDA"] == "ext":
        import importlib
        for name in ("_bisect", "_blake2", "_bz2", "_ctypes", "_datetime", "_decimal", "_hashlib", "_json", "_lzma",
                     "_pickle", "_posixsubprocess", "_random", "_socket", "_struct", "_uuid", "array", "binascii",
                     "fcntl", "math", "select", "zlib"):
            try:  # a Python may be built without one (Ubuntu's 3.12 has no _uuid)
                importlib.import_module(name)
            except ImportError:
                pass
        _note("ext-imported")

    def _cuda() -> None:
        _note("cuda-start")
        lib = ctypes.CDLL("libcuda.so.1")
        _note("cuda-dlopened")
        lib.cuInit(0)
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        lib.cuDeviceGet(ctypes.byref(dev), int(os.environ.get("MPI_LOCALRANKID", os.environ.get("PMI_RANK", "0"))))
        lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
        _note("cuda-ready")

    threading.Thread(target=_cuda, daemon=True).start()
