"""The torch-free `--backend nccl` rank on this machine's GPUs (issue 59), in one call:

    python3 tests/gpu/torchfree.py [BEFORE_TREE]

1. kernels: the data check's CUDA kernels (nccl_bench.measure.datakernels) against torch's datacheck, element
   for element, every type and reduction: what fill writes, and count_wrong finding 0 on right data and
   every element on data of another rank;
2. imports: a bench under PYTHONPROFILEIMPORTTIME=1 (every process of it: launcher, warm server, ranks):
   no line imports torch;
3. results: every collective, -d all -o all, checked (-c 1), torch-free and on torch's buffers (-M 1 keeps
   torch): exit 0 and no wrong value either way, and every row of a collective NCCL picks an algorithm for names
   the one NCCL ran (recorded at each size's untimed sync launch);
4. first row: `bench -b 8 -e 8 -n 1 -w 0` timed from outside, torch-free then torch's (-M 1), then
   BEFORE_TREE's (a checkout of the commit before), alternated 3 times after one untimed run of each.
Logs and JSON under $OUT; the table, then the verdict line (`TORCH FREE: PASS` or `FAIL` and why) for the
release's checks (tests/gpu_checks.py, `bench-torch-free`); the timing is shown, not judged.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from startup import OUT, med, timed  # noqa: E402

FIRST = ["-b", "8", "-e", "8", "-n", "1", "-w", "0"]
BENCH = [sys.executable, "-m", "nccl_bench", "bench", "--backend", "nccl"]
TORCH_LINE = re.compile(r"\|\s*torch(\.|$)")


def kernels() -> dict:
    import torch
    from nccl_bench.core import cudadriver
    from nccl_bench.core.devicearray import DeviceArray
    from nccl_bench.measure import datacheck, datakernels
    from nccl_bench.measure.collectives import ALL, Segment
    from nccl_bench.measure.vocabulary import ELEMENT_BYTES, FLOATING
    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda")  # torch's context first: the driver's arrays share the primary context
    gpu = cudadriver.gpu(0)
    k = datakernels.for_gpu(gpu)
    n, nranks, bad = 100_003, 4, []
    for dtype in ELEMENT_BYTES:
        for op in ("sum", "prod", "min", "max", "avg"):
            if op == "avg" and dtype not in FLOATING:
                continue
            arr = DeviceArray.allocate(gpu, n, dtype, cudadriver.mem_alloc, cudadriver.mem_free)
            ref = torch.zeros(n, dtype=getattr(torch, dtype), device="cuda")
            k.fill(arr, 2, op, nranks)
            datacheck.fill(ref, 2, op, nranks)
            torch.cuda.synchronize()
            got = torch.empty_like(ref)
            gpu.current.synchronize()
            cudadriver.copy(got.data_ptr(), arr.data_ptr(), n * arr.element_size())
            if not torch.equal(got, ref):
                bad.append(f"fill {dtype} {op}: {int((got != ref).sum())} differ")
            right = k.count_wrong(arr, [Segment(0, n, 2)], op, nranks, datacheck.CHUNK)
            other = k.count_wrong(arr, [Segment(0, n, 1)], op, nranks, datacheck.CHUNK)
            # the reduction: torch's expected values copied in, then checked by the kernel
            want = datacheck.reduced(0, n, op, nranks, "cuda").to(ref.dtype)
            cudadriver.copy(arr.data_ptr(), want.data_ptr(), n * arr.element_size())
            torch.cuda.synchronize()
            reduced = k.count_wrong(arr, [Segment(0, n, ALL)], op, nranks, datacheck.CHUNK)
            ref_other = datacheck.count_wrong(ref, [Segment(0, n, 1)], op, nranks)
            if right or reduced or other != ref_other or (op != "prod" and other == 0):
                bad.append(f"check {dtype} {op}: right {right}, reduced {reduced}, other {other} (torch {ref_other})")
    return {"bad": bad}


def imports(log: Path) -> dict:
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    with open(log, "w") as err:
        proc = subprocess.run(BENCH + FIRST + ["--verbose"], env=env, stdout=subprocess.PIPE, stderr=err, text=True,
                              timeout=300)
    lines = log.read_text().splitlines()
    torch_lines = [ln for ln in lines if TORCH_LINE.search(ln)]
    return {"exit": proc.returncode, "import_lines": len(lines), "torch_lines": len(torch_lines),
            "first_torch": torch_lines[:3]}


def results(extra: list[str], name: str) -> dict:
    cmd = BENCH + ["--collective", "all", "-d", "all", "-o", "all", "-b", "8", "-e", "1M", "-f", "32", "-n", "2",
                   "-w", "1", "-c", "1", "-J", str(OUT / f"results_{name}.json")] + extra
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    (OUT / f"results_{name}.log").write_text(proc.stdout[-20000:] + "\n--- stderr\n" + proc.stderr[-5000:])
    m = re.search(r"Out of bounds values : (\d+)", proc.stdout)
    rows = len(re.findall(r"^\s+\d+\s+\d+\s+\w+\s+\w+", proc.stdout, re.M))
    return {"exit": proc.returncode, "wrong": int(m.group(1)) if m else None, "rows": rows,
            "unconfirmed": unconfirmed(OUT / f"results_{name}.json")}


def unconfirmed(path: Path) -> int | None:
    """Rows of a collective NCCL picks an algorithm for whose algo_confirmed is missing (the sweep records it at
    each size's sync launch); None without the file."""
    if not path.exists():
        return None
    from nccl_bench import records
    from nccl_bench.measure import collectives
    return sum(1 for r in records.load(str(path)).every_cycle()
               if collectives.get(r["collective"]).nccl_name is not None and r.get("algo_confirmed") in (None, ""))


def first_rows(before: str | None) -> list[dict]:
    tools = [("torch-free", BENCH + FIRST, None), ("torch (-M 1)", BENCH + FIRST + ["-M", "1"], None)]
    if before:
        tools.append(("before", BENCH + FIRST, before))
    rows = []
    for name, cmd, cwd in tools:  # untimed: bytecode written, the check's kernels compiled (as startup.pairs)
        rows.append({"tool": name, "rep": -1, **timed(cmd, cwd=cwd, env=dict(os.environ))})
    for rep in range(3):
        for name, cmd, cwd in tools:
            r = timed(cmd, cwd=cwd, env=dict(os.environ))
            rows.append({"tool": name, "rep": rep, **r})
            print(f"first row {name:14s} rep {rep}: row {r['first_row_s']}, exit {r['exit_s']:.2f} s "
                  f"(code {r['exit']})", flush=True)
    return rows


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    before = sys.argv[1] if len(sys.argv) > 1 else None
    report: dict = {}
    try:
        report["kernels"] = kernels()
    except Exception as e:  # the table says what broke; the other sections still run
        report["kernels"] = {"error": f"{type(e).__name__}: {e}"}
    print("kernels:", report["kernels"], flush=True)
    report["imports"] = imports(OUT / "imports.log")
    print("imports:", report["imports"], flush=True)
    report["results"] = {"torch-free": results([], "torchfree"), "torch (-M 1)": results(["-M", "1"], "torch")}
    print("results:", report["results"], flush=True)
    report["first"] = first_rows(before)
    (OUT / "torchfree.json").write_text(json.dumps(report, indent=1))
    k = report["kernels"]
    print("\n| check | outcome |\n|---|---|")
    bad = f"{len(k['bad'])} bad: {k['bad'][:3]}" if k.get("bad") else "all equal"
    print(f"| kernels vs torch's datacheck | {k.get('error') or bad} |")
    i = report["imports"]
    print(f"| imports under PYTHONPROFILEIMPORTTIME | exit {i['exit']}, {i['import_lines']} lines, "
          f"{i['torch_lines']} of torch |")
    for name, r in report["results"].items():
        print(f"| every collective -d all -o all, {name} | exit {r['exit']}, {r['rows']} rows, wrong {r['wrong']}, "
              f"algorithm not recorded {r['unconfirmed']} |")
    for name in dict.fromkeys(r["tool"] for r in report["first"]):
        mine = [r for r in report["first"] if r["tool"] == name and r["rep"] >= 0]
        print(f"| first row / exit, {name} | {med(r['first_row_s'] for r in mine)} / "
              f"{med(r['exit_s'] for r in mine):.2f} s (median of {len(mine)}) |")
    why = verdict(report)
    print(f"\nTORCH FREE: {'FAIL ' + why if why else 'PASS'}")
    return 1 if why else 0


def verdict(report: dict) -> str:
    """'' when the kernels equal torch's check, no process imported torch and every result is exact; else why not."""
    k, i = report["kernels"], report["imports"]
    if k.get("error") or k.get("bad"):
        return f"kernels: {k.get('error') or k['bad'][:2]}"
    if i["exit"] or i["torch_lines"]:
        return f"imports: exit {i['exit']}, {i['torch_lines']} lines import torch ({i['first_torch'][:1]})"
    bad = [f"{n}: exit {r['exit']}, wrong {r['wrong']}, algorithm not recorded {r['unconfirmed']}"
           for n, r in report["results"].items() if r["exit"] or r["wrong"] != 0 or r["unconfirmed"] != 0]
    return "; ".join(bad)


if __name__ == "__main__":
    sys.exit(main())
