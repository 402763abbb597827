/* Which algorithm and protocol NCCL chose for each collective, recorded from NCCL itself: a profiler
 * plugin of nccl_bench's own (NCCL's profiler interface v5, NCCL 2.24 and later, loaded through
 * NCCL_PROFILER_PLUGIN). NCCL gives the plugin a pointer to its activation mask: the mask stays 0, so
 * NCCL starts no event and a timed loop pays one test of a word, until nb_record(1) asks for collective
 * events; each then leaves its function, count, type, algorithm and protocol here, read back with
 * nb_seen(). The types below are copied from NCCL's src/include/plugin/profiler/profiler_v5.h (2.28.9),
 * which defines the interface's ABI. nccl_bench/comm/algorecorder.py builds and loads this file. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

typedef int ncclResult_t; /* ncclSuccess = 0 */
typedef void (*ncclDebugLogger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);
typedef int ncclProfilerEventState_v5_t;
enum { ncclProfileColl = 1 << 1 };

typedef struct {
  uint64_t type;
  void *parentObj;
  int rank;
  union {
    struct { bool graphCaptured; int groupDepth; } groupApi;
    struct { const char *func; size_t count; const char *datatype; int root; void *stream; bool graphCaptured; } collApi;
    struct { const char *func; size_t count; const char *datatype; void *stream; bool graphCaptured; } p2pApi;
    struct { void *stream; } kernelLaunch;
    struct {
      uint64_t seqNumber; const char *func; void const *sendBuff; void *recvBuff; size_t count; int root;
      const char *datatype; uint8_t nChannels; uint8_t nWarps; const char *algo; const char *proto; void *parentGroup;
    } coll;
    struct { const char *func; void *buff; const char *datatype; size_t count; int peer; uint8_t nChannels; void *parentGroup; } p2p;
    struct { pid_t pid; uint8_t channelId; int peer; int nSteps; int chunkSize; int isSend; } proxyOp;
    struct { int step; } proxyStep;
    struct { uint8_t channelId; uint64_t pTimer; } kernelCh;
    struct { int64_t id; void *data; } netPlugin;
  };
} ncclProfilerEventDescr_v5_t;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v5_t *eDescr);
  ncclResult_t (*stopEvent)(void *eHandle);
  ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_v5_t eState, void *eStateArgs);
  ncclResult_t (*finalize)(void *context);
} ncclProfiler_v5_t;

#define NB_MAX 4096
struct nb_call { char func[32]; uint64_t count; char datatype[24]; char algo[24]; char proto[24]; };
static struct nb_call seen[NB_MAX];
static int nseen;
static int *mask; /* NCCL's activation mask, once a communicator was made */
static int wanted;
static int context_token;

static void copy(char *dst, const char *src, size_t n) {
  strncpy(dst, src ? src : "", n - 1);
  dst[n - 1] = 0;
}

static ncclResult_t nb_init(void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes,
                            int nranks, int rank, ncclDebugLogger_t logfn) {
  (void)commId; (void)commName; (void)nNodes; (void)nranks; (void)rank; (void)logfn;
  *context = &context_token;
  mask = eActivationMask;
  __atomic_store_n(mask, wanted, __ATOMIC_RELAXED);
  return 0;
}

static ncclResult_t nb_start(void *context, void **eHandle, ncclProfilerEventDescr_v5_t *d) {
  (void)context;
  *eHandle = NULL; /* nothing to stop: a call is recorded when it starts */
  if (d->type == ncclProfileColl && nseen < NB_MAX) {
    struct nb_call *c = &seen[nseen++];
    copy(c->func, d->coll.func, sizeof c->func);
    c->count = d->coll.count;
    copy(c->datatype, d->coll.datatype, sizeof c->datatype);
    copy(c->algo, d->coll.algo, sizeof c->algo);
    copy(c->proto, d->coll.proto, sizeof c->proto);
  }
  return 0;
}

static ncclResult_t nb_stop(void *eHandle) { (void)eHandle; return 0; }
static ncclResult_t nb_state(void *eHandle, ncclProfilerEventState_v5_t s, void *a) { (void)eHandle; (void)s; (void)a; return 0; }
static ncclResult_t nb_finalize(void *context) { (void)context; return 0; }

ncclProfiler_v5_t ncclProfiler_v5 = {"nccl_bench", nb_init, nb_start, nb_stop, nb_state, nb_finalize};

/* Ours: record collective calls from now on (1) or no more (0); how many were recorded; the i-th; forget. */
int nb_record(int on) {
  wanted = on ? ncclProfileColl : 0;
  if (mask) __atomic_store_n(mask, wanted, __ATOMIC_RELAXED);
  return mask != NULL;
}
int nb_count(void) { return nseen; }
const struct nb_call *nb_call_at(int i) { return i >= 0 && i < nseen ? &seen[i] : NULL; }
void nb_forget(void) { nseen = 0; }
