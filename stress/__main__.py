"""python -m stress ...: the `nccl-stress` console script (stress.command.console)."""
import sys

from nccl_bench import entry

if __name__ == "__main__":
    sys.exit(entry("stress.command", "console"))
