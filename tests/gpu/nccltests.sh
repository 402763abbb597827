#!/usr/bin/env bash
# Build nccl-tests (single process, MPI=0, sm_90) from .nccltests/ (its source: not committed, carry
# it) into /tmp/nccltests/build, against the NCCL and CUDA runtime the device's torch uses.
# A no-op when the binaries are already there; prints the LD_LIBRARY_PATH to run them with into
# /tmp/nccltests/env. Source it or run it; `bench.sh` calls it.
# Get the source where there is a network (the GPU machine has none), then carry it:
#   git clone https://github.com/NVIDIA/nccl-tests .nccltests   (reference runs: 2.19.0, commit b7e251c)
#   echo /.nccltests/ >> .git/info/exclude     (public code: never committed here)
set -u
NTD=/tmp/nccltests
if [ -x $NTD/build/all_reduce_perf ] && [ -f $NTD/env ]; then echo "nccl-tests already built"; exit 0; fi
[ -d .nccltests ] || { echo "no .nccltests/ here: nccl-tests not built"; exit 0; }
t0=$SECONDS
find_one() { python3 - "$1" <<'PY'
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages(), "/usr/local/cuda", "/usr/local"]
for r in roots:
    hits = sorted(glob.glob(os.path.join(r, "**", sys.argv[1]), recursive=True))
    if hits:
        print(hits[0]); break
PY
}
if [ -n "${NCCL_HOME:-}" ]; then NCCL_H=$NCCL_HOME/include/nccl.h; NCCL_SO=$NCCL_HOME/lib/libnccl.so.2
else NCCL_H=$(find_one "nccl.h"); NCCL_SO=$(find_one "libnccl.so.2"); fi
CUDART=$(find_one "libcudart.so.1[0-9]")
echo "nccl.h: ${NCCL_H:-none}; libnccl: ${NCCL_SO:-none}; libcudart: ${CUDART:-none}; nvcc: $(command -v nvcc)"
[ -n "$NCCL_H" ] && [ -n "$NCCL_SO" ] && [ -n "$CUDART" ] && command -v nvcc >/dev/null || {
  echo "missing a header, library or nvcc: nccl-tests not built"; exit 0; }
rm -rf $NTD && mkdir -p $NTD/home/lib && cp -r .nccltests/. $NTD/src-tree
ln -s "$(dirname "$NCCL_H")" $NTD/home/include
ln -s "$NCCL_SO" $NTD/home/lib/libnccl.so && ln -s "$CUDART" $NTD/home/lib/libcudart.so
timeout 400 make -C $NTD/src-tree -j 32 MPI=0 BUILDDIR=$NTD/build NVCC="$(command -v nvcc)" \
  NCCL_HOME=$NTD/home CUDA_LIB=$NTD/home/lib NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
  > $NTD/build.log 2>&1
rc=$?
echo "export LD_LIBRARY_PATH=$(dirname "$NCCL_SO"):$(dirname "$CUDART")\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" > $NTD/env
cp $NTD/build.log "${OUT:-/tmp}/nccltests_build.log" 2>/dev/null
echo "nccl-tests build exit $rc after $((SECONDS - t0)) s"; tail -n 3 $NTD/build.log
ls $NTD/build/*_perf 2>/dev/null | wc -l
