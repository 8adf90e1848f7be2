"""The C heap of a long-running server: keep freed memory instead of handing it back.

A server handles uploads and jobs of a few MB each, over and over. With glibc's defaults,
freeing such a buffer often shrinks the heap (a trim, or `madvise` on a thread's arena), and
the next request faults the same pages in again, each one zeroed by the kernel: 4-6% of a
secure leader's CPU went to `clear_page` under load (perf, docs/secure-mode.md). Raising
the trim threshold keeps up to `TRIM_THRESHOLD` of free memory per arena for reuse; a fixed
mmap threshold keeps buffers up to `MMAP_THRESHOLD` on the heap (a mapped buffer is unmapped
when freed and faulted in again when it comes back); `TOP_PAD` grows a heap by that much at a
time. Memory the server once needed stays with it, up to those bounds, which is what a server
whose load repeats wants. Not glibc (musl, macOS): nothing to do."""

from __future__ import annotations

import ctypes
import platform

M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
"""glibc's `mallopt` parameters (malloc.h)."""

TRIM_THRESHOLD = 128 << 20
TOP_PAD = 16 << 20
MMAP_THRESHOLD = 16 << 20
"""Above the largest request a server takes (8 MiB) and a job's buffers (under 2 MB)."""


def keep_freed_memory() -> bool:
    """Set the C heap's thresholds for a server process (see the module's docstring); True
    when glibc took them, False where there is no glibc `mallopt`."""
    if platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return all(mallopt(p, v) == 1 for p, v in (*settings, (M_TOP_PAD, TOP_PAD)))
