#!/usr/bin/env bash
# Record the replay zoo on this machine's GPUs (4 needed), in one call: tensor parallel, pipeline parallel,
# mixture of experts, FSDP2, a 2-D DeviceMesh with split groups, and a job hung by a rank that skips a
# collective (dumped by torch's watchdog on timeout). Everything lands in $OUT/zoo.tgz (one file: a call
# returns 8 at most), with each job's console in its folder; a table last: exit code, dumps, traces, size.
#   bash tests/gpu/zoo.sh            # then: rm -r tests/fixtures/zoo; tar -xzf zoo.tgz -C tests/fixtures/
# zoo.tgz is the committed layout (tests/fixtures/zoo/README.md): dumps, gzipped traces, calls, steps.json; the
# consoles go in zoo_logs.tgz.
set -u
source tests/gpu/env.sh
W=/tmp/zoo_rec  # recorded here; only the two tarballs go under $OUT (a call returns 8 files at most)
Z=$W/zoo
rm -rf "$Z" && mkdir -p "$Z"
RUN="timeout 150 python3 -m torch.distributed.run --standalone --nproc-per-node 4"
job() {  # KIND CMD...
  local kind=$1; shift
  mkdir -p "$Z/$kind"
  local t0=$SECONDS
  "$@" > "$Z/$kind/console.txt" 2>&1
  echo "$kind $? $((SECONDS - t0))" >> "$Z/exits.txt"
}
: > "$Z/exits.txt"
for kind in tp pp moe mesh; do
  job $kind $RUN tests/gpu/zoo.py $kind "$Z/$kind"
done
job fsdp2 $RUN tests/gpu/fsdp_job.py "$Z/fsdp2" --layers 2 --width 1024
mkdir -p "$Z/hang/fr"
TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE="$Z/hang/fr/dump_rank" TORCH_NCCL_ASYNC_ERROR_HANDLING=1 \
  job hang $RUN tests/gpu/zoo.py hang "$Z/hang"
python3 - "$Z" <<'PY'
import sys
from pathlib import Path
z = Path(sys.argv[1])
exits = {k: (int(c), int(s)) for k, c, s in (line.split() for line in (z / "exits.txt").read_text().splitlines())}
print(f"{'job':8s} {'exit':>4s} {'s':>4s} {'dumps':>5s} {'traces':>6s} {'KiB':>7s}")
for kind, (code, secs) in exits.items():
    d = z / kind
    files = [f for f in d.rglob("*") if f.is_file()]
    print(f"{kind:8s} {code:4d} {secs:4d} {len(list(d.glob('fr/*'))):5d} {len(list(d.glob('kineto/*'))):6d} "
          f"{sum(f.stat().st_size for f in files) / 1024:7.0f}")
PY
tar -czf "$OUT/zoo_logs.tgz" -C "$W" $(cd "$W" && ls zoo/*/console.txt zoo/exits.txt)
rm -f "$Z"/*/console.txt "$Z"/exits.txt "$Z"/hang/calls_rank*.json  # a hung job's ranks never finish their list
gzip -9 "$Z"/*/kineto/*.json && for f in "$Z"/*/kineto/*.json.gz; do mv "$f" "${f%.json.gz}.pt.trace.json.gz"; done
cp tests/fixtures/zoo/README.md "$Z/" 2>/dev/null
tar -czf "$OUT/zoo.tgz" -C "$W" zoo && ls -la "$OUT/zoo.tgz"
nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l
