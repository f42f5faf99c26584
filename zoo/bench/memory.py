"""A process's resident memory as the Linux kernel counts it (/proc/self/status): now
(`resident_mb`), its high-water mark (`peak_resident_mb`), and `PeakMemory`, which resets
the mark before a span (writing 5 to /proc/self/clear_refs) so that the span's own peak is
read, not that of whatever ran before it in the process.

Why not `tracemalloc` or `resource.getrusage`: TensorFlow's and NumPy's buffers are
allocated outside Python's allocator, and `ru_maxrss` is the peak of the whole process,
which cannot be reset; the kernel's mark counts every page and can.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_mb(field: str) -> float:
    for line in STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {field} in {STATUS}; got a kernel without it")


def resident_mb() -> float:
    """This process's resident memory now (VmRSS), in MB (2**20 bytes)."""
    return _status_mb("VmRSS")


def peak_resident_mb() -> float:
    """This process's resident high-water mark (VmHWM), in MB, since it started or since
    the last `reset_peak()`."""
    return _status_mb("VmHWM")


def reset_peak() -> None:
    """Starts the high-water mark again at the current resident memory."""
    CLEAR_REFS.write_text("5")


class PeakMemory:
    """The resident memory at the start of a span and its peak within it, in MB.

    Attributes:
        before_mb: the resident memory when the span started.
        peak_mb: the high-water mark within the span (set when it ends).

    Example:
        with PeakMemory() as span:
            outputs = model(signature, **inputs)
        print(span.before_mb, span.peak_mb, span.growth_mb)
    """

    def __init__(self) -> None:
        self.before_mb: float | None = None
        self.peak_mb: float | None = None

    def __enter__(self) -> "PeakMemory":
        reset_peak()
        self.before_mb = resident_mb()
        return self

    def __exit__(self, *exception: Any) -> None:
        self.peak_mb = peak_resident_mb()

    @property
    def growth_mb(self) -> float:
        """The peak above the memory at the start."""
        if self.before_mb is None or self.peak_mb is None:
            raise RuntimeError("PeakMemory.growth_mb read before the span ended")
        return self.peak_mb - self.before_mb
