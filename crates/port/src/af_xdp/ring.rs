//! The four AF_XDP rings as user space sees them: single-producer,
//! single-consumer arrays of a power-of-two size, indexed by free-running
//! 32-bit counters (`producer`, `consumer`) that wrap around; the slot of
//! counter `i` is `i & mask`.
//!
//! Fill and TX rings are produced here and consumed by the kernel; RX and
//! completion rings the other way round. The protocol (if_xdp.h, libxdp's
//! xsk.h) is the classic one:
//! - the producer writes entries, then publishes them with a **release**
//!   store of `producer`; the consumer reads `producer` with an **acquire**
//!   load before it reads the entries;
//! - the consumer reads entries, then gives the slots back with a
//!   **release** store of `consumer`; the producer reads `consumer` with an
//!   **acquire** load before it overwrites those slots.
//!
//! Each side keeps a cached copy of the other side's counter and refreshes
//! it only when the cache says the ring is full (producer) or empty
//! (consumer), so the shared cache line is touched once per batch, not once
//! per frame.

use super::mmap::Mapping;
use std::marker::PhantomData;
use std::sync::atomic::{fence, AtomicU32, Ordering};

/// Where a ring's parts live (inside its mmap'ed area or, in tests, in
/// ordinary memory).
#[derive(Clone, Copy)]
pub(crate) struct RingParts<T> {
    pub producer: *const AtomicU32,
    pub consumer: *const AtomicU32,
    pub flags: *const AtomicU32,
    pub descs: *mut T,
    pub size: u32,
}

/// Entries a producer may still write: the consumer's position plus the
/// ring size, minus the producer's position, in wrapping arithmetic.
#[inline]
pub(crate) fn free_entries(consumer: u32, producer: u32, size: u32) -> u32 {
    consumer.wrapping_add(size).wrapping_sub(producer)
}

/// Entries written but not yet consumed, in wrapping arithmetic.
#[inline]
pub(crate) fn filled_entries(consumer: u32, producer: u32) -> u32 {
    producer.wrapping_sub(consumer)
}

/// The side of a ring that user space produces (fill, TX).
pub(crate) struct ProdRing<T> {
    parts: RingParts<T>,
    mask: u32,
    /// Our producer position: entries below it are written (published or not).
    cached_prod: u32,
    /// The kernel's consumer position as last read.
    cached_cons: u32,
    _entries: PhantomData<T>,
    /// The ring's mapping (None for a ring in ordinary memory, in tests):
    /// kept alive as long as the pointers into it.
    _map: Option<Mapping>,
}

/// The side of a ring that user space consumes (RX, completion).
pub(crate) struct ConsRing<T> {
    parts: RingParts<T>,
    mask: u32,
    /// The kernel's producer position as last read.
    cached_prod: u32,
    /// Our consumer position: entries below it are read (released or not).
    cached_cons: u32,
    _entries: PhantomData<T>,
    /// As in [`ProdRing`].
    _map: Option<Mapping>,
}

// SAFETY: the rings point into memory shared only with the kernel; each ring
// value is the one user-space party of its ring and moves with its owner.
unsafe impl<T> Send for ProdRing<T> {}
// SAFETY: as above.
unsafe impl<T> Send for ConsRing<T> {}

impl<T: Copy> ProdRing<T> {
    /// # Safety
    /// `parts` must point at a live ring of `parts.size` (a power of two)
    /// entries, inside `map` if given (else alive as long as this value),
    /// with no other user-space producer.
    pub(crate) unsafe fn new(parts: RingParts<T>, map: Option<Mapping>) -> ProdRing<T> {
        debug_assert!(parts.size.is_power_of_two());
        // SAFETY: the caller vouches for the pointers. We are the only
        // producer, so `producer` holds our own last published value.
        let (prod, cons) = unsafe {
            (
                (*parts.producer).load(Ordering::Relaxed),
                (*parts.consumer).load(Ordering::Acquire),
            )
        };
        ProdRing {
            parts,
            mask: parts.size - 1,
            cached_prod: prod,
            cached_cons: cons,
            _entries: PhantomData,
            _map: map,
        }
    }

    pub(crate) fn size(&self) -> u32 {
        self.parts.size
    }

    /// How many entries may be written now (at least `want` are looked
    /// for: the kernel's consumer position is re-read only if the cached
    /// one leaves fewer).
    #[inline]
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let free = free_entries(self.cached_cons, self.cached_prod, self.parts.size);
        if free >= want {
            return free;
        }
        // SAFETY: `consumer` points into the live ring (see `new`). Acquire:
        // the kernel's reads of the slots it released happen before our writes.
        self.cached_cons = unsafe { (*self.parts.consumer).load(Ordering::Acquire) };
        free_entries(self.cached_cons, self.cached_prod, self.parts.size)
    }

    /// Writes entry `i` of the next batch (`i` below what [`Self::free`] returned).
    #[inline]
    pub(crate) fn write(&mut self, i: u32, value: T) {
        let slot = (self.cached_prod.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot < size, so the entry lies in the ring; it is free
        // (the caller stays below `free`), so the kernel does not read it.
        unsafe { self.parts.descs.add(slot).write(value) };
    }

    /// Publishes the first `n` entries written since the last submit.
    #[inline]
    pub(crate) fn submit(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cached_prod = self.cached_prod.wrapping_add(n);
        // SAFETY: `producer` points into the live ring. Release: the entries
        // written above are visible before the kernel sees the new position.
        unsafe { (*self.parts.producer).store(self.cached_prod, Ordering::Release) };
    }

    /// Entries published but not yet taken by the kernel.
    #[inline]
    pub(crate) fn pending(&mut self) -> u32 {
        // SAFETY: as in `free`.
        self.cached_cons = unsafe { (*self.parts.consumer).load(Ordering::Acquire) };
        filled_entries(self.cached_cons, self.cached_prod)
    }

    /// Whether the kernel asks to be woken (a system call) to look at this ring.
    #[inline]
    pub(crate) fn needs_wakeup(&self) -> bool {
        // Orders our last producer store before the flag load (store->load
        // needs a full fence), so a flag the kernel set after it found the
        // ring empty is not missed.
        fence(Ordering::SeqCst);
        // SAFETY: `flags` points into the live ring.
        let flags = unsafe { (*self.parts.flags).load(Ordering::Relaxed) };
        flags & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

impl<T: Copy> ConsRing<T> {
    /// # Safety
    /// As [`ProdRing::new`], with no other user-space consumer.
    pub(crate) unsafe fn new(parts: RingParts<T>, map: Option<Mapping>) -> ConsRing<T> {
        debug_assert!(parts.size.is_power_of_two());
        // SAFETY: the caller vouches for the pointers.
        let (prod, cons) = unsafe {
            (
                (*parts.producer).load(Ordering::Acquire),
                (*parts.consumer).load(Ordering::Relaxed),
            )
        };
        ConsRing {
            parts,
            mask: parts.size - 1,
            cached_prod: prod,
            cached_cons: cons,
            _entries: PhantomData,
            _map: map,
        }
    }

    /// How many entries (at most `max`) are ready to read.
    #[inline]
    pub(crate) fn available(&mut self, max: u32) -> u32 {
        let mut n = filled_entries(self.cached_cons, self.cached_prod);
        if n == 0 {
            // SAFETY: `producer` points into the live ring. Acquire: the
            // kernel's writes of the entries happen before our reads.
            self.cached_prod = unsafe { (*self.parts.producer).load(Ordering::Acquire) };
            n = filled_entries(self.cached_cons, self.cached_prod);
        }
        n.min(max)
    }

    /// Reads entry `i` of the ready batch (`i` below what [`Self::available`] returned).
    #[inline]
    pub(crate) fn read(&self, i: u32) -> T {
        let slot = (self.cached_cons.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot < size; the entry is published and not yet released.
        unsafe { self.parts.descs.add(slot).read() }
    }

    /// Gives the first `n` ready entries back to the kernel.
    #[inline]
    pub(crate) fn release(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cached_cons = self.cached_cons.wrapping_add(n);
        // SAFETY: `consumer` points into the live ring. Release: our reads
        // of the entries complete before the kernel may overwrite them.
        unsafe { (*self.parts.consumer).store(self.cached_cons, Ordering::Release) };
    }
}

/// A ring in ordinary memory standing in for the kernel's mapping, so the
/// user-space side can be tested without a socket.
#[cfg(test)]
pub(crate) struct FakeRing<T> {
    pub producer: AtomicU32,
    pub consumer: AtomicU32,
    pub flags: AtomicU32,
    pub descs: Vec<T>,
}

#[cfg(test)]
impl<T: Copy> FakeRing<T> {
    /// `size` entries of `empty`, both counters at `start`. Boxed: the ring
    /// values hold pointers into it.
    pub(crate) fn new(size: u32, start: u32, empty: T) -> Box<FakeRing<T>> {
        Box::new(FakeRing {
            producer: AtomicU32::new(start),
            consumer: AtomicU32::new(start),
            flags: AtomicU32::new(0),
            descs: vec![empty; size as usize],
        })
    }

    pub(crate) fn parts(&mut self) -> RingParts<T> {
        RingParts {
            producer: &self.producer,
            consumer: &self.consumer,
            flags: &self.flags,
            descs: self.descs.as_mut_ptr(),
            size: self.descs.len() as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_arithmetic_wraps() {
        assert_eq!(free_entries(0, 0, 8), 8);
        assert_eq!(free_entries(0, 8, 8), 0);
        assert_eq!(free_entries(u32::MAX - 2, u32::MAX, 8), 6);
        // Producer wrapped past zero, consumer not yet.
        assert_eq!(free_entries(u32::MAX - 1, 3, 8), 3);
        assert_eq!(filled_entries(u32::MAX - 1, 3), 5);
        assert_eq!(filled_entries(7, 7), 0);
    }

    /// One ring, one producer and one consumer (as user space and the
    /// kernel would be), across the 2^32 wrap of the counters.
    #[test]
    fn producer_and_consumer_agree_across_the_wrap() {
        let mut fake = FakeRing::new(8, u32::MAX - 5, 0u64);
        let parts = fake.parts();
        // SAFETY: `fake` outlives both ring values; one producer, one consumer.
        let (mut prod, mut cons) =
            unsafe { (ProdRing::new(parts, None), ConsRing::new(parts, None)) };
        let mut next_write = 0u64;
        let mut next_read = 0u64;
        for round in 0..20 {
            let want = 1 + round % 8;
            let free = prod.free(want);
            let n = want.min(free);
            for i in 0..n {
                prod.write(i, next_write);
                next_write += 1;
            }
            prod.submit(n);
            assert!(prod.pending() <= 8);
            // Consume a bit less than was written, so the ring fills up at times.
            let take = cons.available(want.saturating_sub(1).max(1));
            for i in 0..take {
                assert_eq!(cons.read(i), next_read);
                next_read += 1;
            }
            cons.release(take);
        }
        let rest = cons.available(u32::MAX);
        for i in 0..rest {
            assert_eq!(cons.read(i), next_read);
            next_read += 1;
        }
        cons.release(rest);
        assert_eq!(next_read, next_write);
        assert!(next_write > 40, "the ring carried {next_write} entries");
        assert_eq!(prod.pending(), 0);
        assert_eq!(prod.free(8), 8);
        // The counters did wrap.
        assert!(fake.producer.load(Ordering::Relaxed) < 100);
    }

    #[test]
    fn full_ring_refuses_more() {
        let mut fake = FakeRing::new(4, 0, 0u64);
        let parts = fake.parts();
        // SAFETY: as above.
        let (mut prod, mut cons) =
            unsafe { (ProdRing::new(parts, None), ConsRing::new(parts, None)) };
        assert_eq!(prod.free(4), 4);
        for i in 0..4 {
            prod.write(i, i as u64);
        }
        prod.submit(4);
        assert_eq!(prod.free(1), 0);
        assert_eq!(cons.available(2), 2);
        cons.release(2);
        assert_eq!(prod.free(1), 2);
        assert!(!prod.needs_wakeup());
        fake.flags
            .store(libc::XDP_RING_NEED_WAKEUP, Ordering::Relaxed);
        assert!(prod.needs_wakeup());
    }
}
