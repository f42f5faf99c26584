"""What long work says while it runs: `model.fit`'s verbosity, and `Step`, a line on stderr for
each long step (reading and decoding data, training a tokenizer, exporting, evaluating)."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO


def fit_verbosity() -> int:
    """Keras' `verbose`: 1 (a progress bar) when stdout is a terminal, else 2 (one line per
    epoch, which reads well in a log file and does not fill it with bar redraws)."""
    return 1 if sys.stdout.isatty() else 2


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class Step:
    """A long step, said on stderr as it runs.

    It writes `zoo: <what> ...` when it starts and `zoo: <what>: done in <seconds> s` when it
    ends (`stopped after <seconds> s` when an exception leaves it). With `total`, `advance(n)`
    counts the work done: at a terminal the line is redrawn in place, at most five times a
    second (`zoo: decoding 50,000 images ... 12,000/50,000`); in a log file only the start and
    end lines appear, so a log reads one line per step.

    Example:
        >>> import io
        >>> log = io.StringIO()
        >>> with Step("training the tokenizer", stream=log):
        ...     pass
        >>> log.getvalue().splitlines()[0]
        'zoo: training the tokenizer ...'

    Args:
        what: the step, as a phrase ("decoding 50,000 images from train/").
        total: how many units the step does, for `advance`; None when unknown.
        stream: where the lines go (default: `sys.stderr` when the step starts).
        enabled: False makes the step silent (it still counts): for a library function
            whose caller did not ask for progress.
    """

    def __init__(self, what: str, total: int | None = None,
                 stream: TextIO | None = None, enabled: bool = True) -> None:
        self.what, self.total, self.done, self.enabled = what, total, 0, enabled
        self._stream = stream
        self._lock = threading.Lock()
        self._started = self._drawn = 0.0
        self._live = False  # set on entering: whether the stream is a terminal

    @property
    def stream(self) -> TextIO:
        """Where the lines go."""
        return self._stream if self._stream is not None else sys.stderr

    def __enter__(self) -> Step:
        self._started = time.perf_counter()
        self._live = _is_terminal(self.stream)
        self._write(f"zoo: {self.what} ...", final=not self._live)
        return self

    def advance(self, count: int = 1) -> None:
        """Counts `count` more units done (thread-safe); redraws the line at a terminal."""
        with self._lock:
            self.done += count
            now = time.perf_counter()
            if self._live and now - self._drawn >= 0.2:
                self._drawn = now
                of = f"/{self.total:,}" if self.total is not None else ""
                self._write(f"zoo: {self.what} ... {self.done:,}{of}", final=False)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        seconds = time.perf_counter() - self._started
        outcome = f"done in {seconds:.1f} s" if kind is None else f"stopped after {seconds:.1f} s"
        self._write(f"zoo: {self.what}: {outcome}", final=True)

    def _write(self, line: str, final: bool) -> None:
        if not self.enabled:
            return
        # At a terminal, each line overwrites the last ("\r", then clear to the end).
        start = "\r\x1b[K" if self._live else ""
        self.stream.write(start + line + ("\n" if final else ""))
        self.stream.flush()
