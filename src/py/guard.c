/* Python calls made on kubevents' own threads, fenced against CPython ending the thread.
 *
 * CPython ends a thread that takes the GIL while the interpreter finalizes with pthread_exit(), and the
 * forced unwinding that follows aborts the process when it reaches a Rust frame. A sink call that returns
 * during finalization (its request answered at last, or its socket closed by the finalization) takes the GIL
 * on its way back, inside CPython's own frames. The call is made here under a cancellation cleanup buffer:
 * the unwinding stops at this C frame, before any Rust frame, and the thread parks for good, as CPython's
 * own daemon threads end. Nothing else changes: a call that returns, returns as usual.
 */
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <unistd.h>

typedef struct _object PyObject;
extern PyObject *PyObject_Vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);

static void park_for_good(void *unused) {
    (void)unused;
    for (;;) {
        pause();
    }
}

PyObject *kubevents_guarded_vectorcall(PyObject *callable, PyObject **args, size_t nargsf) {
    PyObject *result;
    pthread_cleanup_push(park_for_good, NULL);
    result = PyObject_Vectorcall(callable, args, nargsf, NULL);
    pthread_cleanup_pop(0);
    return result;
}

/* Threads of kubevents' own that meet an abort during finalization anyway (CPython's thread exit unwinding
 * through frames of another Rust extension in a sink's call chain, such as pydantic-core under the official
 * client, which aborts) park too, instead of taking the process down: the exit hook sets this handler once
 * it has closed the gate. Other threads' aborts go to the handler that was there before. */
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

int kubevents_contain_aborts(void) {
    struct sigaction sa;
    sa.sa_handler = on_abort;
    sa.sa_flags = 0;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGABRT, &sa, &previous_abort);
}
