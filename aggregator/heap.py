"""The C heap of a long-running server: keep freed buffers for the next request.

A server handles uploads and jobs of a megabyte or two, over and over. With glibc's defaults
(a trim threshold that follows the largest freed block, a few MB here), freeing them often
shrinks the heap (a trim, or `madvise` on a thread's arena), and the next request faults the
same pages in again, each one zeroed by the kernel: 4-6% of a secure leader's CPU went to
`clear_page` under load (perf, docs/secure-mode.md). A fixed trim threshold keeps up to
`TRIM_THRESHOLD` of free memory at the top of each arena for reuse; buffers of
`MMAP_THRESHOLD` or more (a request near a method's size limit) are mapped on their own and
given back as soon as they are freed, so one large request leaves nothing behind;
`TOP_PAD` grows a heap by that much at a time. Not glibc (musl, macOS): nothing to do."""

from __future__ import annotations

import ctypes
import platform

M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
"""glibc's `mallopt` parameters (malloc.h)."""

TRIM_THRESHOLD = 16 << 20
TOP_PAD = 2 << 20
MMAP_THRESHOLD = 4 << 20
"""Measured (bench.secure's whole path and tests/conformance/test_roles.py's memory test):
16 MiB kept a leader's page faults at about 0.5 a report (1.67 with glibc's defaults) with a
server's memory after four near-limit requests within 30-50 MB of the defaults'; 128 MiB
kept no fewer faults and up to 70 MB more."""


def keep_freed_memory() -> bool:
    """Set the C heap's thresholds for a server process (see the module's docstring); True
    when glibc took them, False where there is no glibc `mallopt`."""
    if platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settings = (
        (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        (M_TOP_PAD, TOP_PAD),
    )
    return all(mallopt(parameter, value) == 1 for parameter, value in settings)
