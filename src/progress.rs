//! Progress of long library work, reported to an observer the caller
//! supplies: the library never draws or prints, so a program that embeds it
//! decides what the user sees (the `smoothe` CLI draws indicatif bars).
//!
//! ```
//! use smoothe::progress::{Progress, Observer};
//! use std::sync::{Arc, Mutex};
//!
//! /// Keeps the last status, for a test or a GUI.
//! #[derive(Default)]
//! struct Last(Mutex<String>);
//! impl Progress for Last {
//!     fn advance(&self, done: u64, status: &str) {
//!         *self.0.lock().unwrap() = format!("{done}: {status}");
//!     }
//! }
//! let last = Arc::new(Last::default());
//! let observer: Observer = last.clone();
//! observer.advance(3, "best 12.5");
//! assert_eq!(*last.0.lock().unwrap(), "3: best 12.5");
//! ```

use std::sync::Arc;

/// Receives the progress of one task at a time. Every method defaults to
/// doing nothing, so an observer implements only what it shows.
pub trait Progress: Send + Sync {
    /// A task of `total` steps named `what` ("step", "labels") begins.
    fn begin(&self, _what: &str, _total: u64) {}
    /// `done` steps of the current task are done; `status` is a short
    /// summary ("best 12.5, 8 s left").
    fn advance(&self, _done: u64, _status: &str) {}
    /// The current task ended.
    fn end(&self) {}
}

/// An observer that shows nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Progress for Quiet {}

/// A shared observer, cheap to clone into every part of a run.
pub type Observer = Arc<dyn Progress>;

/// The observer that shows nothing.
pub fn quiet() -> Observer {
    Arc::new(Quiet)
}
