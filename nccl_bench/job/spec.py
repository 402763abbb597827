"""A command's job as its driver checked it: what each rank needs to join the job and run its worker. The driver
hands it to every rank it starts in a file (written here, read by nccl_bench.job.rank), so a rank runs on the
options the driver validated and never parses the command line again; under torchrun, srun or mpirun each
process builds its own from its command line and goes straight to being a rank (nccl_bench.job.runner)."""
from __future__ import annotations

import importlib
import os
import pickle
import sys
from dataclasses import dataclass
from typing import Callable

from nccl_bench.core import scratch
from nccl_bench.core.errors import UsageError
from nccl_bench.job.options import JobOptions

FILE_NAME = "job.pickle"


@dataclass(frozen=True)
class WorkerRef:
    """Where a rank gets its worker: `module.function(*args)` returns it, called in the rank (a worker is a
    closure, which no file can hold; the options it closes over can)."""

    module: str
    function: str
    args: tuple = ()
    search_path: str | None = None  # the folder of a job script outside the package (its module found there)

    @classmethod
    def of(cls, function: Callable, *args, search_path: str | None = None) -> "WorkerRef":
        """The reference to a module-level `function`, which the caller has imported (a rank forked from the
        driver finds its module loaded)."""
        if function.__module__ == "__main__" or "." in function.__qualname__:
            raise ValueError(f"{function.__qualname__}: a rank finds a worker factory by its module's name")
        return cls(function.__module__, function.__qualname__, args, search_path)

    def build(self) -> Callable:
        if self.search_path and self.search_path not in sys.path:
            sys.path.insert(0, self.search_path)
        return getattr(importlib.import_module(self.module), self.function)(*self.args)


@dataclass(frozen=True)
class JobSpec:
    """`command`: its name, for the log files and what the driver says. `result`: the command's result file
    where known (each rank's library log goes beside it). `torch_free`: the worker loads no torch, so neither
    do the launch and the job store. `meeting`: every rank joins before the worker runs (False for a worker
    that names absent ranks itself: doctor). `store_timeout`: the wait for the job store and its peers, where
    the command sets its own. `argv`: the command line the user typed, which a rank's sys.argv becomes (bench
    records it in its file, as nccl-tests does)."""

    command: str
    job: JobOptions
    worker: WorkerRef
    result: str | None = None
    torch_free: bool = False
    meeting: bool = True
    store_timeout: float | None = None
    argv: tuple[str, ...] = ()


def write(spec: JobSpec) -> str:
    """The spec in a file of a folder only this user reads (the ranks unpickle it: nothing else may write
    there); the caller removes the folder (remove)."""
    folder = scratch.make("job")
    path = os.path.join(folder, FILE_NAME)
    with open(path, "wb") as f:
        pickle.dump(spec, f, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def read(path: str) -> JobSpec:
    try:
        with open(path, "rb") as f:
            spec = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as e:
        raise UsageError(f"{path}: not a job its driver wrote ({type(e).__name__})") from None
    if not isinstance(spec, JobSpec):
        raise UsageError(f"{path}: not a job its driver wrote")
    return spec


def remove(path: str) -> None:
    import shutil
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)
