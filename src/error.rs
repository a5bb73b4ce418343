//! The core's one error type. `src/py/errors.rs` maps each variant to a Python exception.

use std::fmt;
use std::num::NonZeroUsize;
use std::sync::Arc;

/// What went wrong, with enough context (field path, trace line) to say it in one sentence.
#[derive(Debug)]
pub enum Error {
    /// A field has the wrong type (Python `TypeError`).
    Type {
        field: String,
        message: String,
    },
    /// A field has a value that is not allowed or does not parse (Python `ValueError`).
    Value {
        field: String,
        message: String,
    },
    /// An option out of range (Python `ValueError`).
    Option(String),
    /// A clock could not be read.
    Clock(String),
    /// The call is not possible in the object's state (Python `RuntimeError`).
    State(String),
    /// A wait ran out of time (Python `TimeoutError`).
    Timeout(String),
    /// A trace could not be read or a record in it is bad; `line` is 1-based, `file` the trace's path if it
    /// was read from one.
    Trace {
        file: Option<Arc<str>>,
        line: u64,
        source: Box<Error>,
    },
    Io(std::io::Error),
    /// An error raised by user code (a Python callable), carried through the core untouched.
    External(Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    pub fn value(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Value { field: field.into(), message: message.into() }
    }

    pub fn type_(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Type { field: field.into(), message: message.into() }
    }

    pub fn at_line(self, line: u64) -> Self {
        match self {
            e @ Error::Trace { .. } => e,
            e => Error::Trace { file: None, line, source: Box::new(e) },
        }
    }

    /// A trace error of the file `name`; other errors are returned as they are.
    pub fn in_file(self, name: &Arc<str>) -> Self {
        match self {
            Error::Trace { line, source, .. } => Error::Trace { file: Some(Arc::clone(name)), line, source },
            e => e,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Type { field, message } | Error::Value { field, message } => {
                if field.is_empty() {
                    f.write_str(message)
                } else {
                    write!(f, "{field}: {message}")
                }
            }
            Error::Option(m) | Error::Clock(m) | Error::State(m) | Error::Timeout(m) => f.write_str(m),
            Error::Trace { file: Some(file), line, source } => write!(f, "{file}: line {line}: {source}"),
            Error::Trace { file: None, line, source } => write!(f, "line {line}: {source}"),
            Error::Io(e) => write!(f, "{e}"),
            Error::External(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Trace { source, .. } => Some(source.as_ref()),
            Error::Io(e) => Some(e),
            Error::External(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An integer option checked to lie in `min..=max`; errors name the option. The one check of every integer
/// option, so that they all word it alike.
pub fn int_option(name: &str, v: i64, min: i64, max: i64) -> Result<i64> {
    if v < min {
        return Err(Error::Option(format!("{name} must be >= {min}, got {v}")));
    }
    if v > max {
        return Err(Error::Option(format!("{name} must be <= {max}, got {v}")));
    }
    Ok(v)
}

/// An option that counts something (a queue's length, workers, cache entries): at least 1.
pub fn count_option(name: &str, v: i64) -> Result<NonZeroUsize> {
    let max = i64::try_from(usize::MAX).unwrap_or(i64::MAX);
    let v = int_option(name, v, 1, max)?;
    usize::try_from(v).ok().and_then(NonZeroUsize::new).ok_or_else(|| Error::Option(format!("{name}: {v} is no count")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_option_names_the_bound_it_missed() {
        assert_eq!(int_option("n", 0, 0, 5).unwrap(), 0);
        assert_eq!(int_option("n", 5, 0, 5).unwrap(), 5);
        assert_eq!(int_option("retries", -1, 0, 5).unwrap_err().to_string(), "retries must be >= 0, got -1");
        assert_eq!(int_option("retries", 6, 0, 5).unwrap_err().to_string(), "retries must be <= 5, got 6");
        assert!(matches!(int_option("n", 6, 0, 5), Err(Error::Option(_))));
    }

    #[test]
    fn count_option_takes_one_and_more() {
        assert_eq!(count_option("n", 1).unwrap().get(), 1);
        assert_eq!(count_option("n", 4096).unwrap().get(), 4096);
        assert_eq!(count_option("queue_length", 0).unwrap_err().to_string(), "queue_length must be >= 1, got 0");
        assert_eq!(count_option("n", -3).unwrap_err().to_string(), "n must be >= 1, got -3");
        assert_eq!(count_option("n", i64::MAX).unwrap().get() as u64, i64::MAX as u64);
    }
}
