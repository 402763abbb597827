#!/usr/bin/env bash
# Build nccl-tests (sm_90) from .nccltests/ (its source: not committed, carry it) against the NCCL
# and CUDA runtime the device's torch uses, two ways at once:
#   /tmp/nccltests/build      MPI=0: one process drives every GPU (-g N), as the anchors were run;
#   /tmp/nccltests/build_mpi  MPI=1 against MPICH from its PyPI wheel (.whl/mpi/): one process per
#                             GPU under `mpiexec -n N ... -g 1`, the layout clusters and nccl_bench use.
# A no-op when the binaries are already there; writes the environment to run them with (library
# path, mpiexec on PATH) into /tmp/nccltests/env. Source it or run it; `bench.sh` calls it.
# Get both where there is a network (the GPU machine has none), then carry them:
#   git clone https://github.com/NVIDIA/nccl-tests .nccltests   (reference runs: 2.19.0, commit b7e251c)
#   echo /.nccltests/ >> .git/info/exclude     (public code: never committed here)
#   pip download mpich==5.0.2 --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 -d .whl/mpi
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
PATHS="$(dirname "$NCCL_SO"):$(dirname "$CUDART")"
# One make per variant, each in its own copy of the tree (objects differ), run side by side.
build() {  # build DIR [make args...]
  local dir=$1; shift
  cp -r $NTD/src-tree $NTD/tree-$dir
  timeout 400 make -C $NTD/tree-$dir -j 16 BUILDDIR=$NTD/$dir NVCC="$(command -v nvcc)" \
    NCCL_HOME=$NTD/home CUDA_LIB=$NTD/home/lib NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" "$@" \
    > $NTD/$dir.log 2>&1
  echo "nccl-tests $dir: make exit $?"
}
build build MPI=0 &
MPICH_WHL=$(ls .whl/mpi/mpich-*.whl 2>/dev/null | head -n 1)
if [ -n "$MPICH_WHL" ]; then
  python3 -m zipfile -e "$MPICH_WHL" $NTD/mpich-whl
  MPI_HOME=$(ls -d $NTD/mpich-whl/mpich-*.data/data); chmod +x $MPI_HOME/bin/*
  PATHS="$PATHS:$MPI_HOME/lib"
  build build_mpi MPI=1 MPI_HOME=$MPI_HOME &
else
  echo "no .whl/mpi/mpich-*.whl: the one-process-per-GPU nccl-tests is not built"
fi
wait
{ echo "export LD_LIBRARY_PATH=$PATHS\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  [ -n "$MPICH_WHL" ] && echo "export PATH=$MPI_HOME/bin:\$PATH"; } > $NTD/env
cat $NTD/build*.log > "${OUT:-/tmp}/nccltests_build.log" 2>/dev/null
echo "nccl-tests built after $((SECONDS - t0)) s:" $(ls $NTD/build/*_perf 2>/dev/null | wc -l) "one-process," \
  $(ls $NTD/build_mpi/*_perf 2>/dev/null | wc -l) "MPI binaries"
