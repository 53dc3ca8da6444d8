//! A shared mapping of a packet socket's ring, unmapped on drop.

use crate::PortError;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;

pub(crate) struct RingMap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory shared with the kernel; the ring
// protocol (status words with acquire/release ordering) governs access, and
// each ring is owned by one thread at a time.
unsafe impl Send for RingMap {}

impl RingMap {
    pub(crate) fn new(fd: &OwnedFd, len: usize, ifname: &str) -> Result<RingMap, PortError> {
        // SAFETY: mapping a packet socket's ring as the packet(7) man page describes;
        // the result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(PortError::io(
                "mapping the packet ring",
                ifname,
                std::io::Error::last_os_error(),
            ));
        }
        Ok(RingMap {
            ptr: NonNull::new(ptr.cast()).expect("mmap returned null"),
            len,
        })
    }

    /// Pointer to byte `offset` of the ring.
    ///
    /// # Safety
    /// `offset` must be below the mapping's length.
    #[inline]
    pub(crate) unsafe fn at(&self, offset: usize) -> *mut u8 {
        debug_assert!(offset < self.len);
        self.ptr.as_ptr().add(offset)
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
