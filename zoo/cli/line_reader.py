"""Stdin's lines for a filter such as `zoo translate`: read lazily, each decoded alone, and
grouped into batches that end early when reading on would mean waiting.

    lines, ready = stdin_lines()
    for batch in batches(lines, 32, ready):
        ...  # answer the batch, flush, then read on

A line piped in alone is answered without waiting for more (`LineReader.ready`), memory
stays bounded by one batch, and a line that is not valid UTF-8 fails alone: it comes as
`(number, None, problem)` and the lines around it are read as usual.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO, TypeVar

# (line number from 1, the text without its line ending or None, the problem or None)
Line = tuple[int, "str | None", "str | None"]
Item = TypeVar("Item")


class LineReader:
    """The lines of a byte stream, read lazily, with `ready()`: whether the next line (or the
    end) can be had without waiting. On a POSIX file descriptor the stream is read with
    `os.read` and polled with `select`; on anything else `ready()` is always True.

    Args:
        binary: the byte stream, such as `sys.stdin.buffer`; anything that iterates over
            lines of bytes works (an `io.BytesIO`, a test's generator).
    """

    CHUNK = 1 << 16

    def __init__(self, binary: BinaryIO | Iterable[bytes]) -> None:
        self.binary: Any = binary
        self.fd: int | None = None
        self.lines: list[bytes] = []  # complete lines read ahead, at most one chunk's worth
        self.pending, self.eof = b"", False
        if os.name == "posix":
            try:
                self.fd = binary.fileno()  # type: ignore[union-attr]
            except (AttributeError, OSError, ValueError):  # io.BytesIO, a test's stand-in
                self.fd = None

    def ready(self) -> bool:
        """Whether the next line, or the end of the stream, is there without waiting."""
        if self.lines or self.eof or self.fd is None:
            return True
        import select

        try:
            return bool(select.select([self.fd], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def __iter__(self) -> Iterator[bytes]:
        if self.fd is None:
            yield from self.binary
            return
        while True:
            if self.lines:
                yield self.lines.pop(0)
                continue
            if self.eof:
                if self.pending:
                    line, self.pending = self.pending, b""
                    yield line
                return
            chunk = os.read(self.fd, self.CHUNK)
            if not chunk:
                self.eof = True
                continue
            *self.lines, self.pending = (self.pending + chunk).split(b"\n")


def always_ready() -> bool:
    """The `ready` of input that is all there already (arguments, a text-only stdin)."""
    return True


def decoded_lines(reader: LineReader | None) -> Iterator[Line]:
    """Stdin's lines, read lazily as `(line number, text, problem)`: the text without its line
    ending (and a first line without its byte-order mark), or None with a description of the
    problem when the line is not valid UTF-8.

    Args:
        reader: stdin's bytes; None reads `sys.stdin` as text (an `io.StringIO`).
    """
    if reader is None:
        for number, line in enumerate(sys.stdin or (), 1):
            yield number, line.rstrip("\r\n"), None
        return
    for number, raw in enumerate(reader, 1):
        raw = raw.rstrip(b"\r\n")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            yield number, None, (f"is not valid UTF-8 ({error.reason} at byte {error.start}: "
                                 f"{raw[error.start:error.start + 4]!r})")
            continue
        yield number, text.removeprefix("\ufeff") if number == 1 else text, None


def stdin_lines() -> tuple[Iterator[Line], Callable[[], bool]]:
    """`sys.stdin`'s lines (see `decoded_lines`) and the `ready` that says whether the next one
    is there without waiting. Stdin is read as bytes where it has a `buffer`, so that each
    line is decoded alone."""
    binary = getattr(sys.stdin, "buffer", None)
    reader = None if binary is None else LineReader(binary)
    return decoded_lines(reader), always_ready if reader is None else reader.ready


def batches(items: Iterable[Item], size: int, ready: Callable[[], bool]
            ) -> Iterator[list[Item]]:
    """`items` in lists of at most `size`; a list ends early when `ready()` says the next item
    would mean waiting (so a line that came alone is answered without waiting for more).

    Example:
        >>> list(batches(range(5), 2, always_ready))
        [[0, 1], [2, 3], [4]]
    """
    batch: list[Item] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size or not ready():
            yield batch
            batch = []
    if batch:
        yield batch
