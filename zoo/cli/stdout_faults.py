"""Results on stdout when stdout cannot take them: a full disk behind a redirection
(`zoo models > /dev/full`), a reader that went away (`zoo models | head -0`).

While a command runs, `main` puts `FaultNamingStdout` in front of `sys.stdout`. A write or a
flush that fails on a full or read-only disk then raises an OSError that names stdout
(`standard output (/dev/full)`), which `main` prints as its one line; a reader that went
away raises `StdoutClosed`, which `main` ends quietly with status 141, as a filter that
SIGPIPE ends. Either way stdout is pointed at /dev/null at once, so that what is still
buffered goes nowhere and the interpreter's last flush at exit does not fail again (no
"Exception ignored ..." lines).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterable, Iterator

from zoo.training.files.disk_faults import DISK_FAULT_ERRNOS


class StdoutClosed(BrokenPipeError):
    """The reader of stdout has gone."""


def stdout_to_devnull(stream: Any = None) -> None:
    """Points the file descriptor of `stream` (by default `sys.stdout`) at /dev/null, so
    that the interpreter's last flush after a broken pipe or a full disk does not fail
    again; a stream without one (a test's StringIO) is left as it is."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        fd = (sys.stdout if stream is None else stream).fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)


def stdout_name(stream: Any) -> str:
    """`standard output (/dev/full)`: stdout, and what it is where the system says."""
    try:
        return f"standard output ({os.readlink(f'/proc/self/fd/{stream.fileno()}')})"
    except (AttributeError, OSError, ValueError):
        return "standard output"


class FaultNamingStdout:
    """`stream` (sys.stdout), whose `write`, `writelines` and `flush` raise a disk fault as
    an OSError naming stdout and a broken pipe as `StdoutClosed`; everything else is
    `stream`'s."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def write(self, text: str) -> int:
        with self._named_faults():
            return self._stream.write(text)

    def writelines(self, lines: Iterable[str]) -> None:
        with self._named_faults():
            self._stream.writelines(lines)

    def flush(self) -> None:
        with self._named_faults():
            self._stream.flush()

    @contextlib.contextmanager
    def _named_faults(self) -> Iterator[None]:
        try:
            yield
        except BrokenPipeError as error:
            if isinstance(error, StdoutClosed):
                raise
            stdout_to_devnull(self._stream)
            raise StdoutClosed(*error.args) from error
        except OSError as error:
            if error.errno not in DISK_FAULT_ERRNOS or error.filename is not None:
                raise
            name = stdout_name(self._stream)
            stdout_to_devnull(self._stream)
            raise OSError(error.errno, error.strerror, name) from error


@contextlib.contextmanager
def fault_naming_stdout() -> Iterator[None]:
    """Within the block, `sys.stdout` is a `FaultNamingStdout` of itself; it is flushed at the
    end of the block, so that a fault shows here rather than at the interpreter's exit."""
    original = sys.stdout
    if original is None or isinstance(original, FaultNamingStdout):
        yield
        return
    sys.stdout = FaultNamingStdout(original)
    try:
        yield
        sys.stdout.flush()
    finally:
        if isinstance(sys.stdout, FaultNamingStdout):  # (unless the command replaced it)
            sys.stdout = original
