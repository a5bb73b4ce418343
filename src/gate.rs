//! The exit gate and the fork generation: when the threads that run kubevents' work may enter the host
//! interpreter, and which objects a forked child inherited.
//!
//! CPython ends a thread that takes the GIL once the interpreter is finalizing with `pthread_exit`. Its forced
//! unwinding aborts the process as soon as it meets a Rust frame. So every native thread enters through this
//! gate, and so does every thread that steps out of the interpreter inside kubevents: at exit the gate is
//! closed and the closer waits for the threads inside to leave. A thread that meets the closed gate parks for
//! good, as CPython's own daemon threads stop, and the process exits normally around it.
//!
//! `fork()` copies none of the parent's threads, and the locks they held may stay held in the child: the
//! objects made before it know their fork generation and refuse to be used there.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::Error;

static CLOSED: AtomicBool = AtomicBool::new(false);
/// Threads inside the gate, or about to enter again.
static INSIDE: AtomicUsize = AtomicUsize::new(0);
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread holds a `Pass`.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
    /// This thread closed the gate: it runs the interpreter's finalization.
    static CLOSER: Cell<bool> = const { Cell::new(false) };
    /// This thread runs the closure of an `outside`.
    static OUTSIDE: Cell<bool> = const { Cell::new(false) };
}

pub fn park_forever() -> ! {
    loop {
        std::thread::park();
    }
}

/// Counts this thread in, unless the gate is closed to it.
fn enter() -> bool {
    INSIDE.fetch_add(1, SeqCst);
    if CLOSED.load(SeqCst) && !CLOSER.get() {
        INSIDE.fetch_sub(1, SeqCst);
        return false;
    }
    true
}

fn leave() {
    INSIDE.fetch_sub(1, SeqCst);
}

/// A thread's place inside the gate; dropping it leaves.
pub struct Pass(());

impl Drop for Pass {
    fn drop(&mut self) {
        COUNTED.set(false);
        leave();
    }
}

/// This thread holds a `Pass` already (a nested call).
pub fn has_pass() -> bool {
    COUNTED.get()
}

/// A pass for this thread, or None once the gate is closed (to every thread but the closer).
pub fn enter_thread() -> Option<Pass> {
    if !enter() {
        return None;
    }
    COUNTED.set(true);
    Some(Pass(()))
}

/// A step outside the interpreter: `Step::out()` gives up the thread's pass (if it holds one) before the
/// thread leaves, `run(f)` runs `f` outside and enters again before the thread goes back in (a thread that
/// finds the gate closed then parks, unless it is the closer), and `back_in()` restores the pass once inside.
pub struct Step {
    counted: bool,
}

impl Step {
    pub fn out() -> Step {
        let counted = COUNTED.get();
        if counted {
            COUNTED.set(false);
            leave();
        }
        Step { counted }
    }

    /// The part of the step that runs outside: `f`, then entering again.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        let was_outside = OUTSIDE.replace(true);
        let r = f();
        OUTSIDE.set(was_outside);
        if !enter() {
            park_forever();
        }
        r
    }

    pub fn back_in(self) {
        if self.counted {
            COUNTED.set(true);
        } else {
            leave();
        }
    }
}

/// This thread runs inside `Step::run`.
pub fn is_outside() -> bool {
    OUTSIDE.get()
}

/// Closes the gate and waits up to `timeout` for the threads inside to leave; returns how many are still
/// inside. The calling thread stays free to enter.
pub fn close(timeout: Duration) -> usize {
    CLOSER.set(true);
    CLOSED.store(true, SeqCst);
    let deadline = Instant::now() + timeout;
    while INSIDE.load(SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    INSIDE.load(SeqCst)
}

/// In the child after `fork()`: none of the parent's threads came along.
pub fn after_fork() {
    INSIDE.store(0, SeqCst);
    CLOSED.store(false, SeqCst);
    FORK_GENERATION.fetch_add(1, SeqCst);
}

/// An object's kind (for errors) and the fork generation it was made in.
#[derive(Debug, Clone, Copy)]
pub struct Birth {
    what: &'static str,
    generation: u64,
}

impl Birth {
    pub fn now(what: &'static str) -> Birth {
        Birth { what, generation: FORK_GENERATION.load(SeqCst) }
    }

    /// Inherited through `fork()`: made in the parent, before the fork.
    pub fn is_forked(&self) -> bool {
        self.generation != FORK_GENERATION.load(SeqCst)
    }

    /// A state error when inherited through `fork()`.
    pub fn check(&self) -> Result<(), Error> {
        if self.is_forked() {
            let what = self.what;
            return Err(Error::State(format!(
                "this {what} was created before os.fork(): its threads do not exist in the child process; create \
                 a new {what} after the fork"
            )));
        }
        Ok(())
    }
}

/// A core object shared with the core's threads. In a child forked after it was made those threads are gone
/// and the locks they held may stay held: using it is an error, and dropping it leaves it be.
pub struct Owned<T> {
    inner: Arc<T>,
    birth: Birth,
}

impl<T> Owned<T> {
    pub fn new(inner: Arc<T>, what: &'static str) -> Self {
        Owned { inner, birth: Birth::now(what) }
    }

    /// The object, or a state error in a forked child.
    pub fn checked(&self) -> Result<&Arc<T>, Error> {
        self.birth.check().map(|()| &self.inner)
    }

    /// The object, None in a forked child.
    pub fn unforked(&self) -> Option<&Arc<T>> {
        (!self.birth.is_forked()).then_some(&self.inner)
    }

    /// Another object of the same generation (a PLEG's channel).
    pub fn part<U>(&self, inner: Arc<U>, what: &'static str) -> Owned<U> {
        Owned { inner, birth: Birth { what, ..self.birth } }
    }

    pub fn repr(&self, f: impl FnOnce(&T) -> String) -> String {
        match self.unforked() {
            Some(t) => f(t),
            None => format!("{}(created before os.fork(): unusable in this process)", self.birth.what),
        }
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        if self.birth.is_forked() {
            std::mem::forget(self.inner.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    // One test: the gate and the generation are process-wide, and cargo runs tests on parallel threads.
    #[test]
    fn gate_and_fork_generation() {
        // A pass counts the thread in until dropped; a nested step keeps it.
        assert!(!has_pass());
        let pass = enter_thread().expect("open gate");
        assert!(has_pass());
        let step = Step::out();
        assert!(!has_pass());
        assert!(step.run(is_outside));
        assert!(!is_outside());
        step.back_in();
        assert!(has_pass());

        // Closing waits for a thread inside, and counts the ones that stay past the timeout.
        let (go, gone) = (mpsc::channel::<()>(), mpsc::channel::<()>());
        let (release, entered) = (go.0, gone.0);
        let worker = std::thread::spawn(move || {
            let p = enter_thread().expect("open gate");
            entered.send(()).unwrap();
            go.1.recv().unwrap();
            drop(p);
        });
        gone.1.recv().unwrap();
        drop(pass);
        assert_eq!(close(Duration::from_millis(20)), 1);
        // Closed: another thread is refused, the closer is not.
        assert!(std::thread::spawn(|| enter_thread().is_none()).join().unwrap());
        assert!(enter_thread().is_some());
        release.send(()).unwrap();
        worker.join().unwrap();
        assert_eq!(close(Duration::from_secs(5)), 0);

        // A fork opens the gate again, and what was made before it is refused.
        let made = Owned::new(Arc::new(7), "Thing");
        let birth = Birth::now("Thing");
        assert_eq!(**made.checked().unwrap(), 7);
        after_fork();
        CLOSER.set(false);
        assert!(std::thread::spawn(|| enter_thread().is_some()).join().unwrap());
        assert!(birth.is_forked() && made.unforked().is_none());
        let err = made.checked().unwrap_err().to_string();
        assert!(err.contains("this Thing was created before os.fork()"), "{err}");
        assert_eq!(made.repr(|n| n.to_string()), "Thing(created before os.fork(): unusable in this process)");
        assert!(Birth::now("Thing").check().is_ok());
    }
}
