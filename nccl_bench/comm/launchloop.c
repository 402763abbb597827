/* The timed loop of nccl_bench's nccl backend, in C: NCCL calls back to back, as nccl-tests'
 * loop makes them, with no Python between two launches (nccl_bench/comm/launchloop.py builds and
 * loads this file; it has no CUDA or NCCL dependency: it only calls the function pointers it
 * is given).
 *
 * A call is a function pointer and up to 8 integer-class arguments (pointers, size_t, enums,
 * ints). Every NCCL launch function takes only such arguments, and on x86-64 (System V) and
 * AArch64 they travel in integer registers and then 8-byte stack slots in order, so calling
 * any of them through the 8-argument type below passes exactly what it reads; the extra
 * arguments are ignored. launchloop.py only loads this file on those two architectures. */
#include <stdint.h>
#include <time.h>

typedef int (*call8_t)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t);

struct nb_call {
  call8_t fn;
  uintptr_t arg[8];
};

static int call(const struct nb_call *c) {
  return c->fn(c->arg[0], c->arg[1], c->arg[2], c->arg[3], c->arg[4], c->arg[5], c->arg[6], c->arg[7]);
}

/* Iterations first .. first+n-1; iteration i makes the per_iter calls that start at
 * calls[(i % steps) * per_iter]. `before` and `after` (each NULL or one call, e.g. a CUDA event
 * record) are made right before the first and right after the last launch, so that nothing of
 * the caller's lies between them and the loop; `marks` (NULL or n / mark_every calls) one after
 * every mark_every iterations. Stops at the first call that returns nonzero and returns that
 * value (its iteration in *failed_iter, -1 for before/after). *host_ns: the host time of the
 * launches and marks, without before/after. `stamps` (NULL or n / mark_every + 1 values): the
 * monotonic clock (ns) when the launches began, then after each mark: how long the host took over
 * each timed iteration, to set beside its GPU time (a slow iteration whose launch came late is the
 * host's). */
static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* A line-up's exit, made from C as the loop's `before`: spins on a CUDA event (`query` is the driver's
 * cuEventQuery) recorded after the line-up's one-element all_reduce, so that every rank's first launch
 * follows its exit within a microsecond, as nccl-tests' loop follows its Barrier (leaving through the
 * interpreter instead put tens of microseconds, different on each rank, between the exit and the first
 * launch: the first -I iteration ran 35-65 us against a p50 of 11 on 2 x H200). Returns the query's
 * error, or NB_LATE after limit_ns: a peer that late is the caller's to wait for, with its deadline. */
#define CU_NOT_READY 600
#define NB_LATE (-1)

int nb_spin(uintptr_t query, uintptr_t event, uintptr_t limit_ns, uintptr_t u3, uintptr_t u4, uintptr_t u5,
            uintptr_t u6, uintptr_t u7) {
  typedef int (*query_t)(uintptr_t);
  int64_t end = now_ns() + (int64_t)limit_ns;
  int rc;
  (void)u3; (void)u4; (void)u5; (void)u6; (void)u7;
  while ((rc = ((query_t)query)(event)) == CU_NOT_READY)
    if (now_ns() > end) return NB_LATE;
  return rc;
}

/* n calls in order, as one call (a hook that makes several); stops at the first nonzero. */
int nb_seq(uintptr_t calls, uintptr_t n, uintptr_t u2, uintptr_t u3, uintptr_t u4, uintptr_t u5, uintptr_t u6,
           uintptr_t u7) {
  const struct nb_call *c = (const struct nb_call *)calls;
  int rc = 0;
  (void)u2; (void)u3; (void)u4; (void)u5; (void)u6; (void)u7;
  for (uintptr_t k = 0; k < n && rc == 0; k++) rc = call(c + k);
  return rc;
}

int nb_run(const struct nb_call *calls, int per_iter, long steps, long first, long n,
           const struct nb_call *before, const struct nb_call *after, const struct nb_call *marks,
           long mark_every, long *failed_iter, int64_t *host_ns, int64_t *stamps) {
  struct timespec t0, t1;
  int rc = 0;
  *failed_iter = -1;
  if (before && (rc = call(before)) != 0) return rc;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (stamps) stamps[0] = (int64_t)t0.tv_sec * 1000000000LL + t0.tv_nsec;
  for (long i = first; i < first + n && rc == 0; i++) {
    const struct nb_call *c = calls + (i % steps) * per_iter;
    for (int k = 0; k < per_iter && rc == 0; k++, c++) rc = call(c);
    if (rc == 0 && marks && (i - first + 1) % mark_every == 0) {
      rc = call(marks + (i - first) / mark_every);
      if (stamps) stamps[(i - first) / mark_every + 1] = now_ns();
    }
    if (rc != 0) *failed_iter = i;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  *host_ns = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
  if (rc == 0 && after) rc = call(after);
  return rc;
}
