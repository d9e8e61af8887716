//! Strict float mode: flush-to-zero and denormals-are-zero on x86, per thread, for a scope.
//!
//! The envforge strict comparison runs the C reference with FTZ/DAZ set around every batch
//! call (because XLA on CPU runs that way). A denormal input (hypothesis draws them) then reads
//! as zero, and a denormal result is flushed, so the Rust port must run with the same MXCSR
//! bits to agree bit for bit. MXCSR is per thread: every rayon task sets it for itself.

#[cfg(target_arch = "x86_64")]
mod imp {
    use std::arch::asm;

    const FTZ_DAZ: u32 = 0x8040; // bit 15 flush-to-zero, bit 6 denormals-are-zero

    fn read() -> u32 {
        let mut csr: u32 = 0;
        // SAFETY: stmxcsr stores the 32-bit control/status register into `csr`.
        unsafe { asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags)) };
        csr
    }

    fn write(csr: u32) {
        // SAFETY: ldmxcsr loads a value previously read from the same register (plus FTZ/DAZ).
        unsafe { asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, readonly, preserves_flags)) };
    }

    /// Sets FTZ/DAZ while alive (when `strict`), restores the previous bits on drop.
    pub struct FlushDenormals {
        saved: Option<u32>,
    }

    impl FlushDenormals {
        pub fn enter(strict: bool) -> Self {
            if !strict {
                return Self { saved: None };
            }
            let saved = read();
            write(saved | FTZ_DAZ);
            Self { saved: Some(saved) }
        }
    }

    impl Drop for FlushDenormals {
        fn drop(&mut self) {
            if let Some(csr) = self.saved {
                write(csr);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    /// Other architectures: no-op (the C shim does the same outside x86).
    pub struct FlushDenormals;

    impl FlushDenormals {
        pub fn enter(_strict: bool) -> Self {
            Self
        }
    }
}

pub use imp::FlushDenormals;
