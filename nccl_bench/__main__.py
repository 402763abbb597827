"""python -m nccl_bench COMMAND ...: the `nccl-bench` console script (nccl_bench.commands.main)."""
import sys


def _main() -> int:
    try:  # a Ctrl-C while the package imports is the one line too, not a traceback
        from nccl_bench.commands import main
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(_main())
