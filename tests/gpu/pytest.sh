#!/usr/bin/env bash
# The declared GPU cases (tests/gpu_cases.py) under pytest on the GPU machine: `pytest -m gpu`.
# pytest is not on the device: carry its wheels in .whl/pytest/ (kept apart from .whl/*.whl so the
# other scripts' PYTHONPATH does not get them), fetched where there is a network with
#   pip download pytest==9.2.0 pytest-timeout==2.4.0 --only-binary=:all: -d .whl/pytest
# Extra arguments go to pytest (e.g. -k bench). Log in $OUT/pytest_gpu.log; about 2 minutes on 2 x H200.
set -u
source tests/gpu/env.sh
if [ -d .whl/pytest ] && [ ! -d /tmp/pytest-site ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/pytest-site .whl/pytest/*.whl
fi
export PYTHONPATH=/tmp/pytest-site:$PYTHONPATH
timeout 500 python3 -m pytest -n 0 -m gpu tests/test_gpu.py -v -rs -p no:cacheprovider "$@" 2>&1 | tee "$OUT/pytest_gpu.log" | tail -n 25
echo "== GPUs after"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv
