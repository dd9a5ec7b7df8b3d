//! Byte buffers an append uses and drops (its stored text, its log frame), kept for the next
//! append on the same thread: a new buffer of a few kilobytes each time, grown as it is written,
//! cost the allocator more than any other single step of an append.

use std::cell::RefCell;

/// Buffers kept per thread.
const KEPT: usize = 4;
/// A buffer larger than this (a rare huge record) is freed, not kept.
const MAX_KEPT_BYTES: usize = 1 << 20;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer with room for at least `capacity` bytes.
pub(crate) fn take(capacity: usize) -> Vec<u8> {
    let mut buf = SPARE
        .try_with(|s| s.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default();
    buf.reserve(capacity);
    buf
}

/// Gives `buf` back for a later `take`.
pub(crate) fn give(mut buf: Vec<u8>) {
    if buf.capacity() == 0 || buf.capacity() > MAX_KEPT_BYTES {
        return;
    }
    buf.clear();
    let _ = SPARE.try_with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < KEPT {
            s.push(buf);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_is_taken_again_empty() {
        let mut b = take(100);
        b.extend_from_slice(b"hello");
        let cap = b.capacity();
        let ptr = b.as_ptr();
        give(b);
        let again = take(10);
        assert!(again.is_empty());
        assert_eq!((again.as_ptr(), again.capacity()), (ptr, cap));
    }

    #[test]
    fn huge_buffers_are_not_kept() {
        while SPARE.with(|s| s.borrow_mut().pop()).is_some() {}
        give(Vec::with_capacity(MAX_KEPT_BYTES + 1));
        assert_eq!(SPARE.with(|s| s.borrow().len()), 0);
    }
}
