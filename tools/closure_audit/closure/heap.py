"""The process's heap while a closure is read: every allocation from the
heap, and what is freed kept there for the next (glibc's malloc tuned with
mallopt), so a read's large temporary arrays are not fresh memory the kernel
faults in and zeroes for each."""

from __future__ import annotations

import ctypes
import threading
from contextlib import contextmanager

# glibc's mallopt parameters; its default count of mapped blocks, and the highest
# map threshold it grows to by itself.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4
MMAP_MAX_DEFAULT, MMAP_THRESHOLD_MAX = 65536, 32 * 1024 * 1024


_kept = 0  # kept_heap()s entered and not yet left, in any thread
_kept_lock = threading.Lock()


@contextmanager
def kept_heap():
    """Within: every allocation from the heap, and what is freed kept there
    for the next. glibc maps each block over its threshold (32 MB at most)
    on its own and unmaps it when freed, so every large array a read made
    was fresh memory the kernel faulted in and zeroed: at a million paths,
    the read spent 4.9 s in the kernel, 2.6 s with the heap kept. After:
    glibc's limits as it would have grown them by itself."""
    global _kept
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        yield
        return
    with _kept_lock:
        if _kept == 0:
            mallopt(M_MMAP_MAX, 0)
            mallopt(M_TRIM_THRESHOLD, 2**31 - 1)
        _kept += 1
    try:
        yield
    finally:
        with _kept_lock:
            _kept -= 1
            if _kept == 0:
                mallopt(M_MMAP_MAX, MMAP_MAX_DEFAULT)
                mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)
                mallopt(M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD_MAX)
