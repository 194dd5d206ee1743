//! Synchronous io_uring probe. `tokio_uring::start()` panics when io_uring
//! is blocked and a blocked `io_uring_enter` hangs the first op, so before
//! starting the runtime we create a ring with the `io-uring` crate, check
//! the opcodes we need and complete one NOP.

use io_uring::{opcode, IoUring, Probe};

/// `Ok(())` when io_uring works here, else a reason naming the failing step.
pub fn probe_uring() -> Result<(), String> {
    let mut ring = IoUring::new(8).map_err(|e| format!("io_uring_setup: {e}"))?;
    let mut probe = Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("register_probe: {e}"))?;
    let needed = [
        (opcode::Write::CODE, "WRITE"),
        (opcode::Read::CODE, "READ"),
        (opcode::Fsync::CODE, "FSYNC"),
        (opcode::RenameAt::CODE, "RENAMEAT"),
        (opcode::UnlinkAt::CODE, "UNLINKAT"),
    ];
    for (code, name) in needed {
        if !probe.is_supported(code) {
            return Err(format!("kernel lacks io_uring opcode {name}"));
        }
    }
    let nop = opcode::Nop::new().build().user_data(0x7e1e);
    // SAFETY: a NOP entry references no buffers or file descriptors, so no
    // memory must outlive the submission.
    #[allow(unsafe_code)]
    unsafe {
        ring.submission()
            .push(&nop)
            .map_err(|e| format!("push NOP: {e}"))?;
    }
    ring.submit_and_wait(1)
        .map_err(|e| format!("io_uring_enter: {e}"))?;
    let cqe = ring
        .completion()
        .next()
        .ok_or_else(|| "NOP did not complete".to_string())?;
    if cqe.result() < 0 {
        return Err(format!("NOP failed with errno {}", -cqe.result()));
    }
    Ok(())
}
