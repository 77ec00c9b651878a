//! Subnormal floats flushed to zero, as TensorFlow's CPU kernels see them.
//!
//! TensorFlow runs a graph's kernels on its thread pools, whose threads set the processor's
//! *flush-to-zero* and *denormals-are-zero* modes (`port::ScopedFlushDenormal` in
//! `EigenEnvironment::CreateThread`): a subnormal operand reads as zero and a subnormal
//! result is written as zero. So `Cast(1e-40 → bool)` is false and `1 / 1e-38` is inf in a
//! `tf.function`. The session sets the same modes on the threads that run kernels — the
//! calling thread for the length of a step ([`FlushDenormals`], which restores the caller's
//! modes), the executor's threads for good, and a helper running part of a parallel section
//! with its caller's modes ([`with_modes`], `crate::team`) — so the interpreter and
//! compiled clusters (whose SSE/AVX instructions obey the same control register) compute
//! TensorFlow's values for subnormal inputs too. Elsewhere (constant folding before a run,
//! as Grappler's) the process's modes are left alone.
//!
//! x86-64: MXCSR bits FTZ (15) and DAZ (6). AArch64: FPCR.FZ (24), which flushes both
//! operands and results. Other targets: no change.

/// Flush-to-zero and denormals-are-zero on this thread while the guard lives; the thread's
/// previous modes come back when it drops.
#[must_use = "the modes are restored when the guard drops"]
pub struct FlushDenormals {
    saved: Option<u64>,
}

impl FlushDenormals {
    /// Sets the modes on the calling thread.
    pub fn new() -> FlushDenormals {
        FlushDenormals { saved: set_flush(true) }
    }
}

impl Default for FlushDenormals {
    fn default() -> Self {
        FlushDenormals::new()
    }
}

impl Drop for FlushDenormals {
    fn drop(&mut self) {
        if let Some(saved) = self.saved {
            restore(saved);
        }
    }
}

/// Sets (or clears) flush-to-zero and denormals-are-zero on the calling thread for good (a
/// worker thread's start); returns the previous control word where the target has one.
pub fn set_flush(on: bool) -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        const FTZ_DAZ: u32 = (1 << 15) | (1 << 6);
        let mut csr: u32 = 0;
        // SAFETY: stmxcsr/ldmxcsr read and write the thread's SSE control register from and
        // to a valid local; only the two mode bits change.
        unsafe {
            std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags));
            let new = if on { csr | FTZ_DAZ } else { csr & !FTZ_DAZ };
            std::arch::asm!("ldmxcsr [{}]", in(reg) &new, options(nostack, preserves_flags, readonly));
        }
        Some(u64::from(csr))
    }
    #[cfg(target_arch = "aarch64")]
    {
        const FZ: u64 = 1 << 24;
        let fpcr: u64;
        // SAFETY: reads and writes the thread's floating-point control register; only FZ changes.
        unsafe {
            std::arch::asm!("mrs {}, fpcr", out(reg) fpcr, options(nomem, nostack, preserves_flags));
            let new = if on { fpcr | FZ } else { fpcr & !FZ };
            std::arch::asm!("msr fpcr, {}", in(reg) new, options(nomem, nostack, preserves_flags));
        }
        Some(fpcr)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = on;
        None
    }
}

/// The calling thread's floating-point control word (`None` where the target has none here).
pub fn current() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut csr: u32 = 0;
        // SAFETY: stores the thread's SSE control register into a valid local.
        unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags)) };
        Some(u64::from(csr))
    }
    #[cfg(target_arch = "aarch64")]
    {
        let fpcr: u64;
        // SAFETY: reads the thread's floating-point control register.
        unsafe { std::arch::asm!("mrs {}, fpcr", out(reg) fpcr, options(nomem, nostack, preserves_flags)) };
        Some(fpcr)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    None
}

/// Runs `f` with the control word `word` (another thread's [`current`]: a helper running
/// a part of that thread's parallel section computes as that thread would), then restores
/// this thread's own.
pub fn with_modes<R>(word: Option<u64>, f: impl FnOnce() -> R) -> R {
    match (word, current()) {
        (Some(w), Some(mine)) if w != mine => {
            struct Restore(u64);
            impl Drop for Restore {
                fn drop(&mut self) {
                    restore(self.0);
                }
            }
            restore(w);
            let _back = Restore(mine);
            f()
        }
        _ => f(),
    }
}

fn restore(saved: u64) {
    #[cfg(target_arch = "x86_64")]
    {
        let csr = saved as u32;
        // SAFETY: writes back the control word read by `set_flush` on this thread.
        unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, preserves_flags, readonly)) };
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: as above.
        unsafe { std::arch::asm!("msr fpcr, {}", in(reg) saved, options(nomem, nostack, preserves_flags)) };
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = saved;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under the guard a subnormal operand is zero and a subnormal result flushes; after it,
    /// both are back. `black_box` keeps the arithmetic at run time.
    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn subnormals_read_as_zero_only_under_the_guard() {
        use std::hint::black_box;
        let tiny = black_box(1e-40f32);
        assert!(tiny != 0.0);
        assert!((black_box(1.0f32) / black_box(1e-38f32)).is_finite());
        {
            let _flush = FlushDenormals::new();
            assert!(black_box(tiny) * black_box(1.0f32) == 0.0);
            assert_eq!(black_box(1.0f32) / black_box(1e-38f32), f32::INFINITY);
            assert_eq!(black_box(1e-20f32) * black_box(1e-20f32), 0.0);
            assert!(black_box(1e-300f64) * black_box(1e-10f64) == 0.0);
        }
        assert!(black_box(tiny) * black_box(1.0f32) != 0.0);
        assert!(black_box(1e-20f32) * black_box(1e-20f32) != 0.0);
    }
}
