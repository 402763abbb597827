#!/usr/bin/env bash
# pin.sh CMD...: run CMD bound to this rank's own CPUs, one hardware thread of each of PIN_CORES (default 4)
# physical cores, none shared with another rank's (the rank from PMI_RANK, as mpiexec sets it, or LOCAL_RANK).
# For a like-for-like comparison both tools run under it the same way; it is not part of either tool.
r=${PMI_RANK:-${LOCAL_RANK:-0}}
cpus=$(python3 - "$r" "${PIN_CORES:-4}" <<'PY'
import glob, os, sys
rank, n = int(sys.argv[1]), int(sys.argv[2])
cores = {}
for d in sorted(glob.glob("/sys/devices/system/cpu/cpu[0-9]*"), key=lambda p: int(p.rsplit("cpu", 1)[1])):
    cpu = int(d.rsplit("cpu", 1)[1])
    try:
        key = tuple(open(f"{d}/topology/{f}").read().strip() for f in ("physical_package_id", "core_id"))
    except OSError:
        key = (str(cpu),)
    if cpu in os.sched_getaffinity(0):
        cores.setdefault(key, cpu)  # the core's first hardware thread
mine = list(cores.values())[rank * n:(rank + 1) * n]
print(",".join(map(str, mine or list(cores.values())[:n])))
PY
)
exec taskset -c "$cpus" "$@"
