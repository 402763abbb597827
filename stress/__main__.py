"""python -m stress ...: the `nccl-stress` console script (stress.command.console)."""
import sys

from stress.command import console

if __name__ == "__main__":
    sys.exit(console())
