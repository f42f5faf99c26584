"""How much `model.fit` prints: a progress bar for a person, one line per epoch for a log."""

from __future__ import annotations

import sys


def fit_verbosity() -> int:
    """Keras' `verbose`: 1 (a progress bar) when stdout is a terminal, else 2 (one line per
    epoch, which reads well in a log file and does not fill it with bar redraws)."""
    return 1 if sys.stdout.isatty() else 2
