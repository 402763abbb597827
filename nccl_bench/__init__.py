"""nccl-bench: NCCL bus bandwidth, communicator-init latency, re-init stress, acceptance and replay."""
__version__ = "0.1.0"


def entry(module: str, name: str) -> int:
    """Run `module.name()` as a command's entry point (`python -m nccl_bench`, `python -m stress`): a
    Ctrl-C while the module imports is the one line and 130, as everywhere else, not a traceback."""
    import importlib
    import sys
    try:
        main = getattr(importlib.import_module(module), name)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return main()
