"""A span's own peak resident memory (`zoo.bench.memory`), read from the Linux kernel."""

from __future__ import annotations

import os

import numpy as np
import pytest

from zoo.bench import memory

pytestmark = pytest.mark.skipif(
    not (memory.STATUS.is_file() and os.access(memory.CLEAR_REFS, os.W_OK)),
    reason="needs Linux's /proc/self/status and a writable /proc/self/clear_refs")

MB = 2 ** 20


def test_a_span_sees_its_own_allocation_and_not_an_earlier_one():
    buffer = np.ones(96 * MB, dtype=np.uint8)  # touched pages: resident
    del buffer
    with memory.PeakMemory() as quiet:
        pass
    with memory.PeakMemory() as busy:
        buffer = np.ones(64 * MB, dtype=np.uint8)
        del buffer
    assert quiet.growth_mb < 16  # the 96 MB before the span are not its peak
    assert 60 <= busy.growth_mb < 96
    assert busy.peak_mb >= busy.before_mb + 60
    assert memory.resident_mb() < busy.peak_mb  # the buffer is gone again


def test_the_growth_is_read_only_once_the_span_ended():
    with pytest.raises(RuntimeError, match="before the span ended"):
        memory.PeakMemory().growth_mb
