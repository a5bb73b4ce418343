/* Python calls made on kubevents' own threads, fenced against CPython ending the thread.
 *
 * CPython before 3.14 ends a thread that takes the GIL while the interpreter finalizes with pthread_exit(), and the
 * forced unwinding that follows aborts the process when it reaches a Rust frame. A sink call that returns
 * during finalization (its request answered at last, or its socket closed by the finalization) takes the GIL
 * on its way back, inside CPython's own frames. The call is made here under a cancellation cleanup buffer:
 * the unwinding stops at this C frame, before any Rust frame, and the thread parks for good, as CPython's
 * own daemon threads end. Nothing else changes: a call that returns, returns as usual. From 3.14 on CPython
 * parks such a thread itself, and this file is not built (build.rs).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

typedef struct _object PyObject;
extern PyObject *PyObject_Vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);

static void park_for_good(void *unused) {
    (void)unused;
    for (;;) {
        pause();
    }
}

PyObject *kubevents_guarded_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *result;
    pthread_cleanup_push(park_for_good, NULL);
    result = PyObject_Vectorcall(callable, args, nargsf, kwnames);
    pthread_cleanup_pop(0);
    return result;
}

/* Threads of kubevents' own that meet an abort during finalization anyway (CPython's thread exit unwinding
 * through frames of another Rust extension in a sink's call chain, such as pydantic-core under the official
 * client, which aborts) park too, instead of taking the process down: the exit hook sets this handler as it
 * closes the gate. Other threads' aborts go to the handler that was there before. */
static __thread int own_thread;
static struct sigaction previous_abort;

void kubevents_mark_own_thread(void) {
    own_thread = 1;
}

static void on_abort(int sig) {
    if (own_thread) {
        park_for_good(NULL);
    }
    sigaction(SIGABRT, &previous_abort, NULL);
    raise(sig);
}

/* Installs on_abort once: a second install would save on_abort itself as the previous handler, and an abort on
 * another thread would then call on_abort again and again instead of ending the process. The previous handler
 * is saved before on_abort can run. */
int kubevents_contain_aborts(void) {
    static atomic_flag installed = ATOMIC_FLAG_INIT;
    struct sigaction sa;
    if (atomic_flag_test_and_set(&installed)) {
        return 0;
    }
    if (sigaction(SIGABRT, NULL, &previous_abort) != 0) {
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_abort;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGABRT, &sa, NULL);
}
