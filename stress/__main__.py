"""python -m stress ...: the `nccl-stress` console script (stress.command.console)."""
import sys


def _main() -> int:
    try:  # a Ctrl-C while the package imports is the one line too, not a traceback
        from stress.command import console
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return console()


if __name__ == "__main__":
    sys.exit(_main())
