"""python -m stress ...: parse and delegate (see stress.command)."""
import sys

from nccl_bench.job.cli import guarded
from stress.command import main

if __name__ == "__main__":
    sys.exit(guarded(lambda: main(sys.argv[1:])))
