"""The bench tests' fake clock: `time.perf_counter` of the harness (`zoo.bench.steps`) made
to move only when a test's step moves it."""

from __future__ import annotations

import pytest

from zoo.bench import steps


class FakeClock:
    """`time.perf_counter` that moves only when a step says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(steps.time, "perf_counter", fake)
    return fake
