//! Memory mappings: the UMEM (anonymous memory registered with the socket)
//! and the rings (the socket's own memory, mapped at fixed page offsets).

use crate::PortError;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;

/// One mmap'ed area, unmapped on drop.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; who may touch which part of it is
// governed by the ring protocol and the frame ownership of the two halves.
unsafe impl Send for Mapping {}
// SAFETY: as above; the halves sharing the UMEM use disjoint frames.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Anonymous, zeroed, populated memory for the UMEM. Page-aligned (as
    /// XDP_UMEM_REG requires) because mmap returns page-aligned memory.
    pub(crate) fn anonymous(len: usize, ifname: &str) -> Result<Mapping, PortError> {
        // SAFETY: an anonymous private mapping; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        Mapping::checked(ptr, len, "allocating the AF_XDP UMEM", ifname)
    }

    /// A ring of socket `fd`, at its page offset (XDP_PGOFF_*).
    pub(crate) fn ring(
        fd: &OwnedFd,
        len: usize,
        pgoff: u64,
        ifname: &str,
    ) -> Result<Mapping, PortError> {
        // SAFETY: mapping an AF_XDP ring as if_xdp.h describes; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        Mapping::checked(ptr, len, "mapping an AF_XDP ring", ifname)
    }

    fn checked(
        ptr: *mut libc::c_void,
        len: usize,
        what: &'static str,
        ifname: &str,
    ) -> Result<Mapping, PortError> {
        if ptr == libc::MAP_FAILED {
            return Err(PortError::io(what, ifname, std::io::Error::last_os_error()));
        }
        Ok(Mapping {
            ptr: NonNull::new(ptr.cast()).expect("mmap returned null"),
            len,
        })
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Pointer to byte `offset`, for ring parts at the kernel's offsets.
    pub(crate) fn at<T>(&self, offset: u64) -> *mut T {
        assert!(
            (offset as usize) < self.len,
            "ring offset beyond its mapping"
        );
        // SAFETY: offset < len, so the pointer stays inside the mapping.
        unsafe { self.ptr.as_ptr().add(offset as usize).cast() }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what was mapped. For the UMEM, the kernel
        // holds its own references to the pages it pinned, so this is safe
        // even while the socket still lives.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The UMEM: `frames` chunks of `chunk_size` bytes; a frame's address is
/// its byte offset. Shared by the two halves, which own disjoint frames.
pub(crate) struct Umem {
    map: Mapping,
    chunk_size: u32,
}

impl Umem {
    pub(crate) fn new(frames: u32, chunk_size: u32, ifname: &str) -> Result<Umem, PortError> {
        let len = frames as usize * chunk_size as usize;
        Ok(Umem {
            map: Mapping::anonymous(len, ifname)?,
            chunk_size,
        })
    }

    pub(crate) fn base(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn chunk_size(&self) -> u32 {
        self.chunk_size
    }

    /// The `len` bytes at UMEM address `addr`.
    ///
    /// # Safety
    /// The caller must own the frame at `addr` (it is in none of the
    /// kernel's rings) for the life of the slice, and hand out no other
    /// slice of it meanwhile.
    #[inline]
    #[allow(clippy::mut_from_ref)] // frames are owned by the rings' protocol, not by `&self`
    pub(crate) unsafe fn frame_mut(&self, addr: u64, len: usize) -> &mut [u8] {
        assert!(addr as usize + len <= self.len(), "frame beyond the UMEM");
        // SAFETY: in bounds (checked); exclusivity is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.base().add(addr as usize), len) }
    }

    /// The `len` bytes at UMEM address `addr`, as the kernel wrote them.
    ///
    /// # Safety
    /// The caller must own the frame at `addr` for the life of the slice.
    #[inline]
    pub(crate) unsafe fn frame(&self, addr: u64, len: usize) -> &[u8] {
        assert!(addr as usize + len <= self.len(), "frame beyond the UMEM");
        // SAFETY: in bounds (checked); the kernel no longer writes the frame.
        unsafe { std::slice::from_raw_parts(self.base().add(addr as usize), len) }
    }
}
