"""The ranks of a bench job: per init mode and algorithm one communicator, one sweep per collective and (type,
op, root) with NCCL's choice of algorithm recorded at each size's untimed launch (comm.algorecorder), rows
gathered to rank 0, the table printed and the -J file written."""
from __future__ import annotations

import os
import sys

from nccl_bench.records import bench as benchfile
from nccl_bench.measure import collectives
from nccl_bench.records.bench import BenchRow
from nccl_bench.bench.table import Streamed, footer, memory_line
from nccl_bench.job.runner import Job
from nccl_bench.comm import InitPlan
from nccl_bench.core import launch, optionfields
from nccl_bench.core.deadline import Deadline
from nccl_bench.core.startmarks import mark
from nccl_bench.core.errors import EXIT_FAILED, BarrierTimeout, CommError
from nccl_bench.bench.split import GroupJob
from nccl_bench.bench.options import ALGOS, BenchOptions
from nccl_bench.measure.vocabulary import TYPE_NAMES


def _plan(job: GroupJob, o: BenchOptions, init: str, algo: str, counter: int) -> InitPlan:
    """The plan of the job's `counter`-th communicator. Each has a store namespace of its own: under `regular` and
    `stock` PyTorch (and our stock layout) reuse their ID keys, and the next communicator's rank could read the
    ID of the one just destroyed (a bench is not the place for that race: stress and init churn it)."""
    return InitPlan(rank=job.rank, nranks=job.nranks, mode=init, ranks_per_root=o.job.ranks_per_root,
                    counter=counter, store=job.store, local_rank=job.ident.local_rank, algo=ALGOS[algo],
                    proto=o.proto, blocking=True, cta_policy=o.cta_policy, namespace=f"{job.namespace}/{counter}",
                    torch_free=o.torch_free)



def _confirmation(o: BenchOptions) -> dict:
    """How the algorithm is confirmed on this rank: recorded from NCCL in the job itself (comm.algorecorder)."""
    if o.job.backend == "gloo":
        return {"status": "n/a (gloo)"}
    if o.no_algo_confirm:
        return {"status": "not checked (--no-algo-confirm)"}
    from nccl_bench.comm import algorecorder
    why = algorecorder.enable()  # before this process's first communicator: NCCL loads the plugin then
    return {"status": "ok" if why is None else f"not checked: {why}"}


def algo_verdict(algo: str, coll: collectives.Collective, reported: str | None) -> str | None:
    """What goes in a row's algo_confirmed: NCCL's word, 'p2p', or None when not reported."""
    if coll.nccl_name is None:
        return "p2p"
    return reported


def worker(o: BenchOptions):
    """The rank's worker, built as the rank starts (nccl_bench.job.runner.run_rank). A rank of ours starts CUDA in
    a thread now, at its first line, where the job store is found at once; a rank of a user's launcher once it
    has reached the store: started before, it held up the store's rendezvous under mpiexec (docs/validation.md)."""
    ident = launch.detect()
    if o.torch_free and launch.self_launched(ident):
        from nccl_bench.core import cudadriver
        cudadriver.init_early(ident.local_rank)

    def run(job: Job) -> int:
        if o.torch_free and not launch.self_launched(job.ident):
            from nccl_bench.core import cudadriver
            cudadriver.init_early(job.ident.local_rank)
        confirmation = _confirmation(o)  # the profiler plugin named before NCCL loads
        if o.torch_free:  # while CUDA starts in a thread
            from nccl_bench.comm.ncclnames import load
            load()
            mark("nccl-imported")
        return BenchRanks(o, job, confirmation).run()
    return run


class BenchRanks:
    """One rank's side of a bench job: per init mode and algorithm one communicator and a sweep per
    collective and (type, op, root); then every group's rows to rank 0, which prints and writes them."""

    def __init__(self, o: BenchOptions, job: Job, confirmation: dict):
        from nccl_bench.core import threads
        self.o, self.job, self.confirmation = o, job, confirmation
        self.group = GroupJob(job, o.split)  # the whole job when there is no split
        self.rows: list[BenchRow] = []
        self.memory, self.launch_path, self.awake = {}, None, None
        self.census = threads.Census() if o.per_iter_timing else None
        self.unfit = {c: collectives.get(c).unfit(self.group.nranks) for c in o.collective}
        self.said_rowless: set[tuple[str, str]] = set()

    def run(self) -> int:
        job, o = self.job, self.o
        started = benchfile.now()
        devices = job.store.all_gather_obj("bench/devices", device_entry(job, o.job.backend, o.torch_free), timeout=60)
        self._say_skipped()
        error = None
        try:
            self._sweep_everything()
            self._gather_extras()
        except (CommError, BarrierTimeout) as e:
            error = e
        try:
            self.rows = self.group.collect(self.rows)
        except BarrierTimeout as e:  # a group's first rank is gone: keep what this rank's group measured
            error = error or e
        if job.rank != 0:
            if error is not None:
                raise error
            return _exit_code(self.rows, self.confirmation, o)
        return self._write(devices, started, error)

    def _say_skipped(self) -> None:
        for algo, name in self.o.skipped():
            self.job.say(f"# skipped {name} with --algo {algo}: NCCL has no {algo} algorithm for it")
        for name, why in self.unfit.items():
            if why:
                self.job.say(f"# skipped {name}: {why}")

    def _sweep_everything(self) -> None:
        from nccl_bench.comm.lifetime import communicator
        o, counter = self.o, 0
        for init in o.job.init:
            for algo in o.algo:
                todo = [c for a, c in o.pairs() if a == algo and not self.unfit[c]]
                if not todo:
                    continue
                counter += 1
                with communicator(o.job.backend, _plan(self.group, o, init, algo, counter),
                                  Deadline(o.job.timeout)) as comm:
                    self.launch_path = comm.launch_path()
                    for name in todo:
                        self._sweep_collective(comm, collectives.get(name), init, algo)
                    self._plugin_seen()
                    if o.memory:
                        self.memory = peak_memory(comm.device, self.memory)

    def _recorder(self):
        """The sweep's recorder of NCCL's calls, where the algorithm is confirmed."""
        if self.confirmation["status"] != "ok":
            return None
        from nccl_bench.comm import algorecorder
        return algorecorder.recording

    def _plugin_seen(self) -> None:
        """After a communicator's sweeps (the torch backend makes NCCL's communicator at its first call): a
        plugin NCCL never loaded confirmed nothing, and says so."""
        if self.confirmation["status"] == "ok":
            from nccl_bench.comm import algorecorder
            if not algorecorder.loaded():
                self.confirmation["status"] = "not checked: NCCL did not load the profiler plugin"

    def _sweep_collective(self, comm, coll: collectives.Collective, init: str, algo: str) -> None:
        """Every (type, op, root) of one collective swept; rank 0 prints each row the moment it is measured.
        The rows measured stay this rank's even when a later point fails."""
        from nccl_bench.measure.sweep import Sweep  # the engine needs torch: loaded where the job runs
        mark("sweep-imported")
        o, group, recorder = self.o, self.group, self._recorder()
        progress = sys.stderr.isatty() and self.job.rank == 0
        printed = None
        if self.job.rank == 0:
            title = f"{coll.name}  algo {algo}  init {init}  {o.job.backend} x{group.nranks}"
            if o.split is not None:
                title += f"  split {o.split}: group {group.group} of {group.ngroups}"
            printed = Streamed(title, o.run_cycles, o.per_iter_timing, o.report_timestamps, o.report_cputime)

        def measured(r: BenchRow) -> None:
            r.algo, r.init, r.backend, r.nranks = algo, init, o.job.backend, group.nranks
            r.group, r.color = group.row_fields.get("group"), group.row_fields.get("color")
            r.algo_confirmed = algo_verdict(algo, coll, r.algo_confirmed)  # the engine's record of NCCL's choice
            self.rows.append(r)
            if printed is not None:
                printed.row(r)
        try:
            for combo in o.combos(coll, group.nranks):
                plan = o.sweep_plan(o.job.timeout, *combo)
                self._say_rowless(coll, plan, group.nranks)
                tag = "/".join(map(str, (init, algo, *combo)))
                Sweep(group, comm, coll, plan, tag, progress, self.census, recorder).rows(on_row=measured)
        finally:
            if printed is not None:
                printed.close()

    def _say_rowless(self, coll: collectives.Collective, plan, nranks: int) -> None:
        """The sizes that give no row, said once per collective and type: an empty table would otherwise say
        nothing of why."""
        from nccl_bench.measure.vocabulary import ELEMENT_BYTES
        empty = coll.rowless(plan.sizes, ELEMENT_BYTES[plan.dtype], nranks)
        if empty and (coll.name, plan.dtype) not in self.said_rowless:
            self.said_rowless.add((coll.name, plan.dtype))
            shown = ", ".join(map(str, empty[:6])) + (" ..." if len(empty) > 6 else "")
            elt = ELEMENT_BYTES[plan.dtype]
            ranks = f"{nranks} rank{'s' if nranks > 1 else ''}"
            # a collective of the whole count (all_reduce) loses only sizes under one element; the others, a share
            why = (f"under one {plan.type_name} ({elt} B)" if all(s < elt for s in empty)
                   else f"a rank's share rounds down to 0 elements on {ranks}")
            self.job.say(f"# {coll.name} {plan.type_name}: no row at {shown} B: {why} "
                         "(nccl-tests' rounding; it prints them as 0 B)")

    def _gather_extras(self) -> None:
        if self.o.memory:
            self.memory = self.job.store.all_gather_obj("bench/memory", self.memory, timeout=60)
        if self.census is not None:
            self.awake = self.job.store.all_gather_obj("bench/threads", self.census.rows(), timeout=60)

    def _write(self, devices: list[dict], started: str, error) -> int:
        """Rank 0: the metadata, the -J file, nccl-tests' closing lines and the exit code."""
        from nccl_bench.core import threads
        o, rows = self.o, self.rows
        meta = metadata(o, [d["hostname"] for d in devices], self.job.nranks, self.confirmation, error,
                        self.launch_path)
        if o.memory and error is None:
            meta["bench"]["memory"] = self.memory
            print(memory_line(self.memory), flush=True)
        if self.awake is not None:
            meta["bench"]["threads_awake"] = [{"rank": k, **r} for k, rows_ in enumerate(self.awake) for r in rows_]
            print(threads.line(self.awake), flush=True)
        doc = benchfile.document(rows, meta, nccl_config(o), devices, started, ["nccl_bench", *sys.argv[1:]],
                                 [] if error is None else [str(error)], o.min_bw)
        from nccl_bench.records.writing import write_bench  # at the end only: not on a rank's way to its first row
        path = write_bench(doc, o.json)
        print(footer(rows, o.min_bw), flush=True)
        print(f"# results: {path}", flush=True)
        if getattr(error, "kind", None) == "hang":
            print(f"# test timeout: {error.op} did not finish within -T/--timeout {o.job.timeout:g} s", flush=True)
        if error is not None:
            raise error
        return _exit_code(rows, self.confirmation, o, say=self.job.say)


def device_entry(job: Job, backend: str, torch_free: bool = False) -> dict:
    """This rank's entry of nccl-tests' config.devices (asked of the CUDA driver itself where the rank
    loads no torch)."""
    entry = {"rank": job.rank, "group": 0, "pid": os.getpid(), "hostname": job.ident.host, "device": -1,
             "device_hex": "", "device_info": "cpu (gloo)"}
    if backend == "gloo":
        return entry
    if torch_free:
        from nccl_bench.core import cudadriver
        gpu = cudadriver.local_gpu(job.ident.local_rank)
        bus, name, i = gpu.pci(), gpu.name(), gpu.device.index
    else:
        import torch
        i = job.ident.local_rank
        props = torch.cuda.get_device_properties(i)
        bus, name = [getattr(props, f"pci_{k}_id", 0) for k in ("domain", "bus", "device")], props.name
    entry.update(device=i, device_hex=f"{bus[0]:04x}:{bus[1]:02x}:{bus[2]:02x}", device_info=name)
    return entry


def peak_memory(device, before: dict) -> dict:
    """-M: this rank's memory use so far (the largest seen over its communicators)."""
    import resource
    now = {"host_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    if device.type == "cuda":
        import torch
        free, total = torch.cuda.mem_get_info(device)
        now.update(device_used_bytes=total - free, device_total_bytes=total,
                   torch_peak_bytes=torch.cuda.max_memory_allocated(device))
    return {k: max(v, before.get(k, 0)) for k, v in now.items()}


def nccl_config(o: BenchOptions) -> dict:
    """nccl-tests' config block (its booleans as "true"/"false" strings), less the devices."""
    factor = o.stepfactor
    step = ({"step_factor": int(factor) if float(factor).is_integer() else factor} if factor
            else {"step_bytes": o.stepbytes})
    return {"nthreads": 1, "ngpus": 1, "minimum_bytes": o.minbytes, "maximum_bytes": o.maxbytes, **step,
            "warmup_iters": o.warmup_iters, "iterations": o.iters, "aggregated_iterations": o.agg_iters,
            "validation": o.check, "graph": o.cudagraph, "blocking_collectives": benchfile.flag(o.blocking),
            "per_iter_timing": benchfile.flag(o.per_iter_timing), "parallel_init": benchfile.flag(o.parallel_init)}


def _exit_code(rows: list[BenchRow], confirmation: dict, o: BenchOptions, say=None) -> int:
    wrong, _ = benchfile.totals(rows)
    mismatched = sorted({(r.algo, r.collective, r.algo_confirmed) for r in rows
                         if r.algo != "default" and r.algo_confirmed not in (None, "p2p")
                         and r.algo_confirmed.lower() != r.algo})
    if say and mismatched:
        say("# algorithm not confirmed: " + "; ".join(f"{c} asked {a}, NCCL used {u}" for a, c, u in mismatched))
    return EXIT_FAILED if wrong or mismatched or benchfile.below_min_bw(rows, o.min_bw) else 0


def metadata(o: BenchOptions, hosts, nranks: int, confirmation: dict, error, launch_path: str | None = None) -> dict:
    from nccl_bench.core import sysinfo
    meta = sysinfo.collect(o.job.backend, sorted(set(hosts or [])) or None)
    timing = "cuda events around the loop" if o.job.backend != "gloo" else "wall clock around the loop"
    if o.per_iter_timing:
        timing += (", and an event after each iteration (-I)" if o.job.backend != "gloo"
                   else ", and around each iteration, waited for (-I)")
    # every recorded option under its own name (BenchOptions declares them), then what the run adds
    meta["bench"] = {**optionfields.recorded(o), "nranks": nranks, "init": o.job.init,
                     "ranks_per_root": o.job.ranks_per_root,
                     "datatype": "all" if o.datatype == "all" else TYPE_NAMES[o.torch_dtype_name],
                     "stepbytes": None if o.stepfactor else o.stepbytes,
                     "timeout_s": o.job.timeout, "time_unit": "us", "bw_unit": "GB/s (1e9 B/s)", "timing": timing,
                     "launch": launch_path,  # "compiled" (C loop over NCCL's entry points) or "python (why)"
                     "skipped": [{"algo": a, "collective": c} for a, c in o.skipped()],
                     "algo_confirmation": {"status": confirmation.get("status"),
                                           "recorded_at": "each size's untimed sync launch"}}
    if error is not None:
        meta["error"] = error.as_dict() if hasattr(error, "as_dict") else str(error)
    return meta
