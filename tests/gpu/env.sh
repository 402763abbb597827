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
