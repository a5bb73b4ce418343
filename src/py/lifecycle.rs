//! The interpreter's life as kubevents' threads see it: exit, fork and Ctrl-C, on the core's exit gate
//! (`crate::gate`). The exit hook (`kubevents._lifecycle`) first flushes what is live, then closes the gate.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3::{ffi, intern};

use crate::gate::{self, park_forever, Step};

/// `Python::attach` for a thread of kubevents' own. Once the gate is closed the thread parks instead and
/// never returns; a thread that is attached already (a Python thread, or a nested call) goes straight in.
pub fn attach<R>(f: impl FnOnce(Python<'_>) -> R) -> R {
    // SAFETY: callable without the GIL and before or after initialization.
    if gate::has_pass() || unsafe { ffi::PyGILState_Check() } == 1 {
        return Python::attach(f);
    }
    let Some(pass) = gate::enter_thread() else { park_forever() };
    shim::mark_own_thread();
    match Python::try_attach(f) {
        Some(r) => r,
        None => {
            drop(pass);
            park_forever()
        }
    }
}

/// `py.detach(f)`, attaching again only while the gate is open: a thread that finds it closed on its way
/// back parks, unless it is the one finalizing the interpreter.
pub fn detach<R: Send>(py: Python<'_>, f: impl Send + FnOnce() -> R) -> R {
    let step = Step::out();
    let r = py.detach(|| step.run(f));
    step.back_in();
    if IN_CORE_WAIT.get() {
        IN_CORE_WAIT.set(false);
        WAITING.fetch_sub(1, SeqCst);
    }
    r
}

/// `src/py/guard.c`, built for the Pythons that end a thread taking the GIL during finalization (build.rs).
#[cfg(exit_shim)]
mod shim {
    use pyo3::ffi;

    extern "C" {
        /// `PyObject_Vectorcall` under a cancellation cleanup buffer.
        #[link_name = "kubevents_guarded_vectorcall"]
        pub fn vectorcall(
            callable: *mut ffi::PyObject,
            args: *const *mut ffi::PyObject,
            nargsf: usize,
            kwnames: *mut ffi::PyObject,
        ) -> *mut ffi::PyObject;
        fn kubevents_mark_own_thread();
        fn kubevents_contain_aborts() -> i32;
    }

    /// Marks the calling thread as one of kubevents' own, for `contain_aborts`.
    pub fn mark_own_thread() {
        // SAFETY: sets a thread-local flag.
        unsafe { kubevents_mark_own_thread() };
    }

    /// From now on an abort on a thread of kubevents' own parks that thread instead; only the first call
    /// installs the handler.
    pub fn contain_aborts() {
        // SAFETY: installs, once, a SIGABRT handler that is async-signal-safe.
        unsafe { kubevents_contain_aborts() };
    }
}

/// From 3.14 CPython parks a thread that takes the GIL during finalization itself.
#[cfg(not(exit_shim))]
mod shim {
    pub use pyo3::ffi::PyObject_Vectorcall as vectorcall;

    pub fn mark_own_thread() {}

    pub fn contain_aborts() {}
}

/// `f(*args)` for a thread of kubevents' own (a sink, callback, logger or runtime call): should CPython end
/// the thread inside the call, during finalization, the thread parks for good instead of aborting the
/// process (see guard.c).
pub fn call<'py, const N: usize>(f: &Bound<'py, PyAny>, args: [&Bound<'py, PyAny>; N]) -> PyResult<Bound<'py, PyAny>> {
    const { assert!(N < 4) };
    // A free slot before the arguments lets a bound method put its `self` there instead of copying them.
    let mut slots = [std::ptr::null_mut(); 4];
    for (slot, a) in slots[1..].iter_mut().zip(args) {
        *slot = a.as_ptr();
    }
    // SAFETY: the thread is attached (it holds `f`), the arguments outlive the call, slot 0 is ours to lend,
    // and the result is a new reference, or NULL with the exception set.
    unsafe {
        let args = slots.as_mut_ptr().add(1);
        let out = shim::vectorcall(f.as_ptr(), args, N | ffi::PY_VECTORCALL_ARGUMENTS_OFFSET, std::ptr::null_mut());
        Bound::from_owned_ptr_or_err(f.py(), out)
    }
}

/// How often a wait without the GIL looks for a pending signal (Ctrl-C).
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// Threads in a wait that Ctrl-C interrupts (`_interruptible_waits`).
static WAITING: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread is counted in `WAITING` by `check_signals`, until its `detach` returns.
    static IN_CORE_WAIT: Cell<bool> = const { Cell::new(false) };
}

/// Counts a `wait_until` in `WAITING` while it lives.
struct Waiting;

impl Waiting {
    fn begin() -> Waiting {
        WAITING.fetch_add(1, SeqCst);
        Waiting
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        WAITING.fetch_sub(1, SeqCst);
    }
}

/// How many threads are in a wait that Ctrl-C interrupts: a SIGINT sent from now on raises
/// `KeyboardInterrupt` out of such a wait (on the main thread). Lets a test send Ctrl-C once the wait it
/// means to interrupt has begun.
#[pyfunction]
pub fn _interruptible_waits() -> usize {
    WAITING.load(SeqCst)
}

/// Waits for `done(slice)` (a wait of at most `slice` that says whether the condition holds) until it holds
/// or `timeout` passes: true if it holds. The GIL is released meanwhile and signal handlers run every
/// `SIGNAL_CHECK`, so Ctrl-C raises `KeyboardInterrupt` out of the wait.
pub fn wait_until(
    py: Python<'_>,
    timeout: Option<Duration>,
    mut done: impl FnMut(Duration) -> bool + Send,
) -> PyResult<bool> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let _waiting = Waiting::begin();
    loop {
        let slice = deadline.map_or(SIGNAL_CHECK, |d| d.saturating_duration_since(Instant::now()).min(SIGNAL_CHECK));
        if detach(py, || done(slice)) {
            return Ok(true);
        }
        py.check_signals()?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(false);
        }
    }
}

/// For a wait inside `detach` whose loop cannot use `wait_until` (it lives in the core): runs the signal
/// handlers as `wait_until` does between slices, so Ctrl-C raises `KeyboardInterrupt`. Does nothing on a
/// thread that is not inside `detach` (a native thread, which never runs them).
pub fn check_signals() -> PyResult<()> {
    if !gate::is_outside() {
        return Ok(());
    }
    if !IN_CORE_WAIT.replace(true) {
        WAITING.fetch_add(1, SeqCst);
    }
    attach(|py| py.check_signals())
}

/// A `RuntimeError` when the calling thread runs one of `loops`, the asyncio loops of async sinks: a blocking
/// wait there would stop the very loop that the sink's calls need.
pub fn refuse_on_sink_loop(py: Python<'_>, loops: &Bound<'_, PyList>, what: &str) -> PyResult<()> {
    if loops.is_empty() {
        return Ok(());
    }
    let running = py.import(intern!(py, "asyncio"))?.call_method0(intern!(py, "_get_running_loop"))?;
    if !running.is_none() && loops.iter().any(|l| l.is(&running)) {
        return Err(PyRuntimeError::new_err(format!(
            "{what} would block the asyncio loop that runs the broadcaster's async sink, which needs that loop \
             to finish: use `await broadcaster.aclose()` (or `async with`) instead"
        )));
    }
    Ok(())
}

/// Closes the gate and waits, without the GIL, up to `timeout` seconds for the threads inside to leave.
/// Returns how many are still inside (in a Python call that has not returned). Called by the exit hook.
#[pyfunction]
pub fn _close_gate(py: Python<'_>, timeout: f64) -> usize {
    shim::contain_aborts();
    let timeout = Duration::try_from_secs_f64(timeout).unwrap_or_default();
    py.detach(|| gate::close(timeout))
}

/// Runs in the child after `os.fork()`.
#[pyfunction]
pub fn _after_fork_in_child() {
    gate::after_fork();
}

/// Tells the exit hook about `obj`, whose `_exit_flush(timeout)` delivers what it holds at exit.
pub fn track(obj: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = obj.py();
    py.import(intern!(py, "kubevents._lifecycle"))?.call_method1(intern!(py, "track"), (obj,))?;
    Ok(())
}
