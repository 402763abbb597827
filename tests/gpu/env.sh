# Source on the GPU machine: the machine's rules, and the carried wheels on PYTHONPATH.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
# The image sets PYTHONDONTWRITEBYTECODE=1 and keeps no bytecode of its packages: every process compiled each module
# it imported from source (docs/validation.md). A user's Python writes bytecode, and pip (bin/setup too) compiles at
# install: so here, for timings a user would see.
unset PYTHONDONTWRITEBYTECODE
if [ -d .whl ] && [ ! -d /tmp/site ]; then
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# What bin/setup does beyond pip, once per machine: this project's bytecode, the compiled launch loop and the data
# check's kernels, so that a first run starts as a user's first run after setup does
if [ ! -f /tmp/.nb-setup ]; then
  python3 -m compileall -q -j 0 nccl_bench stress $(python3 -c 'import importlib.util as u
for n in ("numpy", "nccl", "cuda"):
    s = u.find_spec(n)
    print(*(s.submodule_search_locations or []) if s else [])' 2>/dev/null) >/dev/null 2>&1
  python3 -m nccl_bench.comm.launchloop >/dev/null 2>&1
  python3 -m nccl_bench.measure.datakernels >/dev/null 2>&1
  python3 -m nccl_bench smoke --nranks 1 --init regular >/dev/null 2>&1
  python3 -m nccl_bench bench --backend nccl -b 8 -e 8 -n 1 -w 0 -J /tmp/nb-setup-first.json >/dev/null 2>&1
  touch /tmp/.nb-setup
fi

