"""The libraries' private APIs this project uses, each the only way to what it gives, in one place: each
function says why, so that an upgrade that moves one fails here, by name. Its imports are made when a function
is called: importing this module loads no library."""
from __future__ import annotations

import os


def let_go_of_forkserver() -> None:
    """A process forked from multiprocessing's forkserver holds the server's "alive" pipe, which keeps the
    server up while any such process lives; no public API lets go of it (a rank of ours does, so that the
    server ends with the launcher and the ranks with the server)."""
    from multiprocessing import forkserver
    alive = getattr(forkserver._forkserver, "_forkserver_alive_fd", None)
    if alive is not None:
        os.close(alive)
        forkserver._forkserver._forkserver_alive_fd = None


def put_multiprocessing_files_in(folder: str) -> None:
    """multiprocessing makes the folder of its sockets (the forkserver's) in the temporary folder, pymp-*, and
    removes it only at a normal exit; no public API puts it elsewhere: here, in the run's own scratch folder,
    which a later run removes where this one was killed (core.scratch)."""
    from multiprocessing import process
    process.current_process()._config["tempdir"] = folder


def multiprocessing_helpers() -> list[tuple[int | None, object]]:
    """(pid, stop) of multiprocessing's forkserver and resource tracker, where running: each stops on its own
    only once it notices its parent is gone, and no public API names its pid or stops it now."""
    from multiprocessing import forkserver, resource_tracker
    return [(getattr(h, "_forkserver_pid", None) or getattr(h, "_pid", None), getattr(h, "_stop", None))
            for h in (forkserver._forkserver, resource_tracker._resource_tracker)]


def abort_process_group(group=None) -> None:
    """torch.distributed has no public abort: destroy_process_group waits for work a hung communicator never
    finishes, and c10d's _abort_process_group aborts it (ncclCommAbort). None: the default group."""
    import torch.distributed as dist
    if group is None:
        dist.distributed_c10d._abort_process_group()
    else:
        dist.distributed_c10d._abort_process_group(group)


def gpu_sleep(cycles: int) -> None:
    """A kernel that spins `cycles` GPU clocks on the current stream: torch.cuda._sleep is the only one torch
    ships (replay holds the first launch back with it, so that every rank's kernels start lined up)."""
    import torch
    torch.cuda._sleep(cycles)


def nccl_function_pointer(symbol: str) -> int:
    """The address of an NCCL function as nccl4py loaded it (0: it has none): the compiled launch loop calls
    NCCL through it, and nccl4py has no public way to give it. Raises where nccl4py lacks the helper."""
    from nccl.bindings._internal import nccl as loaded
    return int(loaded._inspect_function_pointer(symbol) or 0)
