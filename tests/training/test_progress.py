"""A progress bar at a terminal, one line per epoch (or per long step) in a log."""

from __future__ import annotations

import io
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from zoo.training.progress import Step, fit_verbosity


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_the_bar_and_a_log_one_line_per_epoch(monkeypatch):
    monkeypatch.setattr("sys.stdout", _Terminal())
    assert fit_verbosity() == 1
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert fit_verbosity() == 2


def test_a_step_in_a_log_is_a_line_when_it_starts_and_one_when_it_ends():
    log = io.StringIO()
    with Step("decoding 10 images", total=10, stream=log) as step:
        for _ in range(10):
            step.advance()
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in log.getvalue()  # no redraws in a log
    assert lines[0] == "zoo: decoding 10 images ..."
    assert re.fullmatch(r"zoo: decoding 10 images: done in \d+\.\d s", lines[1])
    assert step.done == 10


def test_a_step_at_a_terminal_redraws_its_count_in_place(monkeypatch):
    terminal = _Terminal()
    clock = iter(float(t) for t in range(100))
    monkeypatch.setattr("zoo.training.progress.time.perf_counter", lambda: next(clock))
    with Step("translating 3,000 sentences", total=3000, stream=terminal) as step:
        step.advance(1000)
        step.advance(2000)
    drawn = terminal.getvalue().split("\r\x1b[K")[1:]
    assert drawn == ["zoo: translating 3,000 sentences ...",
                     "zoo: translating 3,000 sentences ... 1,000/3,000",
                     "zoo: translating 3,000 sentences ... 3,000/3,000",
                     "zoo: translating 3,000 sentences: done in 3.0 s\n"]


def test_a_step_left_by_an_error_says_it_stopped():
    log = io.StringIO()
    with pytest.raises(KeyboardInterrupt), Step("exporting", stream=log):
        raise KeyboardInterrupt
    assert log.getvalue().splitlines()[-1].startswith("zoo: exporting: stopped after ")


def test_a_disabled_step_says_nothing_and_still_counts():
    log = io.StringIO()
    with Step("decoding", stream=log, enabled=False) as step:
        step.advance(5)
    assert log.getvalue() == "" and step.done == 5


def test_advance_counts_every_thread():
    step = Step("decoding", total=4000, stream=io.StringIO())
    with step, ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: [step.advance() for _ in range(1000)], range(4)))
    assert step.done == 4000
