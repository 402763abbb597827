/* LD_PRELOAD'ed into a process to name where it aborts: on SIGABRT (glibc's "double free or corruption", a failed
   assert) the native stack goes to stderr, then the default action. Python's faulthandler names only Python frames,
   and none once the interpreter has finalized: an abort in a library's exit-time destructor shows nothing there.
   cc -shared -fPIC -O1 -o /tmp/abort_backtrace.so tests/gpu/abort_backtrace.c */
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_abort(int sig) {
    void *frames[64];
    static const char head[] = "== native stack at SIGABRT:\n";
    write(2, head, sizeof head - 1);
    backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_abort;
    sigaction(SIGABRT, &sa, NULL);
}
