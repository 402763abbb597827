#!/usr/bin/env bash
# The release's check of a bench without torch: tests/gpu/torchfree.py (its docstring says what it runs), the
# verdict line last. Run on the GPU machine from the repository root, tests/gpu/env.sh sourced.
set -u
python3 tests/gpu/torchfree.py "$@"
