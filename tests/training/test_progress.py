"""A progress bar at a terminal, one line per epoch in a log."""

from __future__ import annotations

import io

from zoo.training.progress import fit_verbosity


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_the_bar_and_a_log_one_line_per_epoch(monkeypatch):
    monkeypatch.setattr("sys.stdout", _Terminal())
    assert fit_verbosity() == 1
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert fit_verbosity() == 2
