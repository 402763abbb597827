"""python -m nccl_bench COMMAND ...: the `nccl-bench` console script (nccl_bench.commands.main)."""
import sys

from nccl_bench import entry

if __name__ == "__main__":
    sys.exit(entry("nccl_bench.commands", "main"))
