//! The write path's stop switch. An I/O failure that leaves the WAL's or
//! the manifest's tail unknown (a failed fsync above all) must not be
//! retried as if nothing happened: the first one stops every later write
//! with [`Error::Poisoned`] naming it, until the store is reopened.

use crate::error::{Error, Result};
use crate::util::sync::LockExt;
use std::sync::Mutex;

/// Set once, by the first failure that stops the write path.
#[derive(Default)]
pub(crate) struct Poison(Mutex<Option<String>>);

impl Poison {
    /// `Err(Poisoned)` once the write path stopped.
    pub fn check(&self) -> Result<()> {
        match &*self.0.lock_or_recover() {
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Stop the write path for `cause` (the first cause is kept); the
    /// error to give.
    pub fn stop(&self, cause: &Error) -> Error {
        let mut p = self.0.lock_or_recover();
        if p.is_none() {
            tracing::error!("write path stopped: {cause}");
            *p = Some(cause.to_string());
        }
        Error::Poisoned {
            cause: p.clone().unwrap_or_default(),
        }
    }
}
