"""python -m nccl_bench COMMAND ...: the `nccl-bench` console script (nccl_bench.commands.main)."""
import sys

from nccl_bench.commands import main

if __name__ == "__main__":
    sys.exit(main())
