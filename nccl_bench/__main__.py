"""python -m nccl_bench COMMAND ...: parse the command name and delegate."""
import sys

from nccl_bench.job.cli import guarded
from nccl_bench.commands import dispatch

if __name__ == "__main__":
    sys.exit(guarded(lambda: dispatch(sys.argv[1:])))
