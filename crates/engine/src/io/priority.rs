//! I/O priority of the calling thread (`ioprio_set(2)`), for the threads
//! that work behind the acknowledgement (flushes, compactions), so that
//! their disk requests queue behind the WAL's where the block layer's
//! scheduler honours priorities (`mq-deadline`, `bfq`; `none` ignores
//! them). A request carries the priority of the thread that issues it:
//! reads by `pread` on the thread itself, writes through the io_uring
//! backend only from a thread with its own ring
//! ([`super::Backend::thread_ring`]), which the flush and compaction
//! threads take for this reason.

use crate::error::{Error, Result};

/// A background thread's I/O priority class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoPriority {
    /// As the process (best-effort, level from its nice value).
    Normal,
    /// Best-effort, lowest level (7): served after every normal request
    /// of the same class, never starved.
    Low,
    /// Idle: served only when the disk has nothing else to do. Under a
    /// saturating WAL load it can starve compactions (and then stall
    /// writers): use with care.
    Idle,
}

const IOPRIO_CLASS_SHIFT: i32 = 13;
const IOPRIO_CLASS_BE: i32 = 2;
const IOPRIO_CLASS_IDLE: i32 = 3;
const IOPRIO_WHO_PROCESS: i32 = 1;

impl IoPriority {
    /// `normal`, `low` or `idle`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "normal" => Ok(IoPriority::Normal),
            "low" => Ok(IoPriority::Low),
            "idle" => Ok(IoPriority::Idle),
            other => Err(Error::invalid(
                "background_io_priority",
                format!("{other:?} (expected normal, low or idle)"),
            )),
        }
    }

    /// The name `parse` takes.
    pub fn name(self) -> &'static str {
        match self {
            IoPriority::Normal => "normal",
            IoPriority::Low => "low",
            IoPriority::Idle => "idle",
        }
    }

    /// The `ioprio` value, `None` for "leave as is".
    fn value(self) -> Option<i32> {
        match self {
            IoPriority::Normal => None,
            IoPriority::Low => Some((IOPRIO_CLASS_BE << IOPRIO_CLASS_SHIFT) | 7),
            IoPriority::Idle => Some(IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT),
        }
    }
}

/// Set the calling thread's I/O priority. An error where the kernel
/// refuses (or on systems without `ioprio_set`); the caller logs it.
pub fn set_thread_io_priority(p: IoPriority) -> std::io::Result<()> {
    let Some(value) = p.value() else {
        return Ok(());
    };
    #[cfg(target_os = "linux")]
    {
        #[allow(unsafe_code)]
        // SAFETY: ioprio_set takes three integers; `0` names the calling
        // thread. No memory is passed.
        let r = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, value) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = value;
        Err(std::io::Error::other("ioprio_set is Linux only"))
    }
}

/// The calling thread's I/O priority value as the kernel reports it.
#[cfg(target_os = "linux")]
pub fn thread_io_priority_value() -> std::io::Result<i32> {
    #[allow(unsafe_code)]
    // SAFETY: ioprio_get takes two integers; no memory is passed.
    let r = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(r as i32)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_lowers_its_own_priority_and_no_other() {
        let before = thread_io_priority_value().unwrap();
        let got = std::thread::spawn(|| {
            set_thread_io_priority(IoPriority::Low).unwrap();
            thread_io_priority_value().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(got, (IOPRIO_CLASS_BE << IOPRIO_CLASS_SHIFT) | 7);
        assert_eq!(thread_io_priority_value().unwrap(), before);
        let idle = std::thread::spawn(|| {
            set_thread_io_priority(IoPriority::Idle).unwrap();
            thread_io_priority_value().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(idle >> IOPRIO_CLASS_SHIFT, IOPRIO_CLASS_IDLE);
        assert!(IoPriority::parse("urgent").is_err());
    }
}
