"""A rank of `python -m nccl_bench ARGS...` under torch's profiler (CUDA activity: every kernel, copy and
runtime call with its host time), one chrome trace per rank, gzipped into OUT_DIR. Run one process per GPU
under mpiexec or torchrun: `python3 tests/gpu/profiled.py OUT_DIR bench --backend nccl ...`.
Issue 50: which launch inside a timed loop loads a kernel lazily (its host call takes milliseconds)."""
import gzip
import os
import shutil
import sys

out, args = sys.argv[1], sys.argv[2:]
sys.argv = ["nccl_bench", *args]
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from nccl_bench.commands import main  # noqa: E402

rank = os.environ.get("RANK") or os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or "0"
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    code = main()
path = os.path.join(out, f"trace_rank{rank}.json")
prof.export_chrome_trace(path)
with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
    shutil.copyfileobj(f, g)
os.remove(path)
sys.exit(code)
