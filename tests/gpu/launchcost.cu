// Reference for tests/gpu/launchcost.py: host time per ncclAllReduce launch from a C loop, as
// nccl-tests' BenchTime makes them (one sync launch, then `iters` launches on buffers moved by
// the size each iteration), on a 1-rank communicator. Prints: size host_us device_us (medians).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>
#include <cuda_runtime.h>
#include <nccl.h>
#define CK(x) do { int e_ = (int)(x); if (e_) { fprintf(stderr, "%s failed: %d\n", #x, e_); exit(1); } } while (0)

static double now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 300, iters = 20, warmup = 5, steps = 20;
  const size_t sizes[] = {8, 1024, 65536}, maxb = 65536;
  int dev = 0;
  ncclComm_t comm;
  cudaStream_t s;
  cudaEvent_t e0, e1;
  char *sb, *rb;
  CK(cudaSetDevice(dev));
  CK(ncclCommInitAll(&comm, 1, &dev));
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(ncclMemAlloc((void**)&sb, maxb * steps));
  CK(ncclMemAlloc((void**)&rb, maxb * steps));
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (size_t size : {maxb, sizes[0]}) {  // nccl-tests' warm-up: largest, then smallest
    for (int i = 0; i < warmup; i++) CK(ncclAllReduce(sb + i * size, rb + i * size, size / 4, ncclFloat, ncclSum, comm, s));
    CK(cudaStreamSynchronize(s));
  }
  for (size_t size : sizes) {
    std::vector<double> host, devt;
    for (int r = 0; r < reps; r++) {
      CK(ncclAllReduce(sb, rb, size / 4, ncclFloat, ncclSum, comm, s));  // the sync launch
      CK(cudaStreamSynchronize(s));
      CK(cudaEventRecord(e0, s));
      double t0 = now();
      for (int i = 0; i < iters; i++)
        CK(ncclAllReduce(sb + (i % steps) * size, rb + (i % steps) * size, size / 4, ncclFloat, ncclSum, comm, s));
      double t1 = now();
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      host.push_back((t1 - t0) / iters * 1e6);
      devt.push_back(ms * 1e3 / iters);
    }
    printf("%zu %.3f %.3f %.3f\n", size, median(host), median(devt), host[0]);  // [3]: the first loop's host
  }
  CK(ncclCommDestroy(comm));
  return 0;
}
