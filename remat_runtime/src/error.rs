//! The error type of the runtime. docs/semantics.md, section E, lists the
//! messages and the rule each one enforces.

/// Everything that can go wrong in remat.
///
/// Messages name the checkpoint and region involved (`layers.0::attention`),
/// what went wrong and how to fix it.
///
/// ```
/// let err = remat_runtime::Error::torch("shape mismatch");
/// assert_eq!(err.to_string(), "shape mismatch");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// libtorch raised an exception; `message` is its first line.
    #[error("{message}")]
    Torch {
        /// The first line of the C++ message.
        message: String,
        /// The whole message, backtrace included, for debugging.
        detail: String,
    },
    /// A user-defined autograd function failed.
    #[error("custom function `{function}`: {message}")]
    Function {
        /// The function's name.
        function: String,
        /// What went wrong.
        message: String,
    },
    /// A region was used wrongly or replayed inconsistently; `region` is its
    /// display name (`checkpoint::region`).
    #[error("region `{region}`: {message}")]
    Region {
        /// `checkpoint::region`, or the region alone in an unnamed checkpoint.
        region: String,
        /// What went wrong and how to fix it.
        message: String,
    },
    /// A checkpoint failed (on the forward, or while replaying in backward).
    #[error("checkpoint `{checkpoint}`: {message}")]
    Checkpoint {
        /// The checkpoint's name (`<unnamed>` without one).
        checkpoint: String,
        /// What went wrong.
        message: String,
    },
    /// A memory plan could not be made, read, or applied (budget below the
    /// minimum, a plan file that does not match the model, ...).
    #[error("plan: {0}")]
    Plan(String),
    /// A policy table could not be read, checked or applied (a malformed
    /// pattern, a name the model does not have, a pattern that matched
    /// nothing under strict checking).
    #[error("policy table: {0}")]
    Policy(String),
    /// Something this build or machine does not have (the CUDA diagnostics
    /// on a build without the `cuda` feature, or without a CUDA device).
    #[error("{0}")]
    Unsupported(String),
    /// A broken invariant of remat itself; please report it.
    #[error("remat internal error: {0}")]
    Internal(String),
}

impl Error {
    /// An error from a libtorch message, keeping only its first line for display.
    ///
    /// ```
    /// use remat_runtime::Error;
    /// let err = Error::torch("shape mismatch\nException raised from ... (C++ backtrace)");
    /// assert_eq!(err.to_string(), "shape mismatch");
    /// match err {
    ///     Error::Torch { detail, .. } => assert!(detail.contains("backtrace")),
    ///     _ => unreachable!(),
    /// }
    /// ```
    pub fn torch(message: impl Into<String>) -> Self {
        let detail = message.into();
        let message = first_line(&detail).to_string();
        Error::Torch { message, detail }
    }
}

impl From<tch::TchError> for Error {
    fn from(e: tch::TchError) -> Self {
        match e {
            // tch prefixes "Internal torch error: "; the C++ message says enough.
            tch::TchError::Torch(message) => Error::torch(message),
            other => Error::torch(other.to_string()),
        }
    }
}

/// The first line of a libtorch message (they carry kilobytes of backtrace).
pub(crate) fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s).trim_end()
}

/// Turns a caught panic payload into text. A panic of tch's plain functions
/// (`unwrap` of a `TchError`) is reduced to the C++ message's first line.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        return "panic with a non-string payload".to_string();
    };
    match text.split_once("Torch(\"") {
        Some((_, rest)) => rest
            .split("\\n")
            .next()
            .unwrap_or(rest)
            .trim_end_matches("\")")
            .to_string(),
        None => text,
    }
}

/// Result with remat's [`Error`].
///
/// ```
/// use remat_runtime::{Error, Result};
///
/// fn checked_sqrt(x: f64) -> Result<f64> {
///     if x < 0.0 {
///         return Err(Error::torch(format!("sqrt of {x}")));
///     }
///     Ok(x.sqrt())
/// }
/// assert_eq!(checked_sqrt(4.0).unwrap(), 2.0);
/// assert!(checked_sqrt(-1.0).is_err());
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

thread_local! {
    static QUIET: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs `f`, catching a panic without the panic hook printing it: the
/// caller turns it into an `Err` that carries the message, so the report on
/// stderr (with a backtrace, often from deep inside a replay in backward)
/// would only be noise. Other threads' panics print as usual, and so does
/// every panic in a build with `panic = "abort"`, where nothing catches it
/// and its message is the last thing the process says.
pub(crate) fn catch_quietly<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.with(|q| q.get()) == 0 {
                previous(info)
            }
        }));
    });
    let quiet = u32::from(cfg!(panic = "unwind"));
    QUIET.with(|q| q.set(q.get() + quiet));
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|q| q.set(q.get() - quiet));
    out
}
