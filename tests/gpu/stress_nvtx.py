"""Record stress's NVTX ranges through CUPTI on the GPU machine (Nsight Systems cannot make
a report there). Run one stress job under torchrun so this wrapper is every rank's main:

  python3 -m torch.distributed.run --standalone --nproc-per-node 2 tests/gpu/stress_nvtx.py OUTDIR STRESS-ARGS...

Each rank writes OUTDIR/nvtx-rank<R>.json: NVTX range starts per domain and name, marks,
and a few examples in order.
"""
import collections
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    out, args = Path(sys.argv[1]), sys.argv[2:]
    rank = int(os.environ.get("RANK", 0))
    report = {"rank": rank, "cupti": None}
    records = []
    try:
        from cupti import cupti

        def requested():
            return 8 * 1024 * 1024, 0

        def completed(activities):
            for a in activities:
                if a.kind == cupti.ActivityKind.MARKER:
                    records.append((a.id, int(a.flags_), a.domain or "", a.name or "", a.timestamp))

        cupti.activity_register_callbacks(requested, completed)
        cupti.activity_enable(cupti.ActivityKind.MARKER)
        lib = next((line.split()[-1] for line in open("/proc/self/maps") if "libcupti.so" in line), None)
        if lib:  # NVTX hands its calls to the injection library named here, read at the first NVTX call
            os.environ["NVTX_INJECTION64_PATH"] = lib
        report["cupti"] = lib or "libcupti not mapped"
    except Exception as e:  # say why, and still run stress
        report["cupti"] = f"unavailable: {type(e).__name__}: {e}"
        cupti = None

    from nccl_bench.job.runner import guarded
    from stress.command import main as stress_main
    code = guarded(lambda: stress_main(args))
    if cupti is not None:
        cupti.activity_flush_all(1)
    start = int(cupti.ActivityFlag.MARKER_START) if cupti else 0
    instant = int(cupti.ActivityFlag.MARKER_INSTANTANEOUS) if cupti else 0
    starts, marks = collections.Counter(), collections.Counter()
    examples = []
    for _id, flags, domain, name, ts in sorted(records, key=lambda r: r[4]):
        key = f"{domain or '-'}/{name.split(' ')[0] if name else '?'}"
        if flags & start:
            starts[key] += 1
            if domain == "nccl_bench" and len(examples) < 14:
                examples.append(name)
        elif flags & instant:
            marks[key] += 1
    report.update({"exit": code, "records": len(records), "range_starts": dict(starts),
                   "marks": dict(marks), "first_ranges": examples})
    (out / f"nvtx-rank{rank}.json").write_text(json.dumps(report, indent=1) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
