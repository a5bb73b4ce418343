//! Named threads whose failure to start is an error, not a panic: the OS can refuse a thread (limits,
//! memory), and that must reach Python as an exception.

use std::thread::JoinHandle;

use crate::error::{Error, Result};

pub fn spawn<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<JoinHandle<T>> {
    std::thread::Builder::new()
        .name(format!("kubevents-{name}"))
        .spawn(f)
        .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("cannot start thread kubevents-{name}: {e}"))))
}
