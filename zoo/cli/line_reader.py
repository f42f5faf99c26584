"""Stdin's lines for a filter such as `zoo translate`: read lazily, each decoded alone, cut to
a bound, and grouped into batches that end early when reading on would mean waiting.

    lines, ready = stdin_lines(cap=4096)
    for batch in batches(lines, 32, ready):
        ...  # answer the batch, flush, then read on

A line piped in alone is answered without waiting for more (`LineReader.ready`), and a line
that is not valid UTF-8 fails alone: it comes as `Line(number, None, problem)` and the lines
around it are read as usual.

Memory stays bounded by one batch of bounded lines, however long a line is: of a line longer
than `cap` characters only the first `cap` are kept (`Line.cut` says so); the reader holds
at most `4 x cap` bytes of it (UTF-8 has up to 4 bytes a character) and reads the rest up to
its newline in chunks that it drops. A cut line is handed on as soon as it is cut, and
`ready()` is False while the rest is being dropped, so it is answered before the reader
reaches its end: `zoo translate < /dev/zero` (one endless line) answers at once with a
warning and the translation of the line's start, and then reads on at constant memory until
the input ends or it is stopped (as `wc -l < /dev/zero` does). Only the kept bytes are
checked for UTF-8.
"""

from __future__ import annotations

import codecs
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, AnyStr, BinaryIO, NamedTuple, TypeVar

from zoo.text.length_cap import cut_text

Item = TypeVar("Item")
# The most bytes UTF-8 spends on one character.
UTF8_BYTES_PER_CHARACTER = 4


class Line(NamedTuple):
    """One input line: its number from 1, its text without the line ending (None when it
    could not be read), the problem (None when there was none), and whether it was cut."""

    number: int
    text: str | None
    problem: str | None = None
    cut: bool = False


class LineReader:
    """The lines of a byte stream, read lazily and cut to `limit` bytes, with `ready()`:
    whether the next line (or the end) can be had without waiting. On a POSIX file
    descriptor the stream is read with `os.read` and polled with `select`; on anything else
    `ready()` is always True.

    Iterating gives `(line, cut)`: the line's bytes (with its line ending, where it has one
    and was not cut) and whether it was longer than `limit` bytes (then only its first
    `limit` are given; the rest is read and dropped).

    Args:
        binary: the byte stream, such as `sys.stdin.buffer`; anything with `readline` (an
            `io.BytesIO`) or that iterates over lines of bytes (a test's generator) works.
        limit: the most bytes of a line kept; None keeps whole lines.
    """

    CHUNK = 1 << 16

    def __init__(self, binary: BinaryIO | Iterable[bytes], limit: int | None = None) -> None:
        self.binary: Any = binary
        self.limit = limit
        self.fd: int | None = None
        self.lines: list[tuple[bytes, bool]] = []  # lines read ahead, at most a chunk's worth
        self.pending, self.eof = b"", False
        self.dropping = False  # reading the rest of a line that was cut
        if os.name == "posix":
            try:
                self.fd = binary.fileno()  # type: ignore[union-attr]
            except (AttributeError, OSError, ValueError):  # io.BytesIO, a test's stand-in
                self.fd = None

    def ready(self) -> bool:
        """Whether the next line, or the end of the stream, is there without waiting (False
        while the rest of a cut line is being dropped: its end may be far)."""
        if self.lines or self.eof or self.fd is None:
            return True
        if self.dropping:
            return False
        import select

        try:
            return bool(select.select([self.fd], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def __iter__(self) -> Iterator[tuple[bytes, bool]]:
        if self.fd is None:
            yield from bounded_lines(self.binary, self.limit, self.CHUNK)
            return
        while True:
            if self.lines:
                yield self.lines.pop(0)
                continue
            if self.eof:
                if self.pending:
                    line, self.pending = self.pending, b""
                    yield line, False
                return
            chunk = os.read(self.fd, self.CHUNK)
            if not chunk:
                self.eof = True
                continue
            self._take(chunk)

    def _take(self, chunk: bytes) -> None:
        """Splits a chunk read into lines, keeping at most `limit` bytes of each."""
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            stop = len(chunk) if end < 0 else end + 1
            if self.dropping:
                self.dropping = end < 0
            else:
                self.pending += chunk[start:stop]
                if self.limit is not None and len(self.pending.rstrip(b"\r\n")) > self.limit:
                    self.lines.append((self.pending[:self.limit], True))
                    self.pending, self.dropping = b"", end < 0
                elif end >= 0:
                    self.lines.append((self.pending, False))
                    self.pending = b""
            start = stop


def bounded_lines(stream: Any, limit: int | None, chunk: int = 1 << 16
                  ) -> Iterator[tuple[AnyStr, bool]]:
    """`(line, cut)` for each line of a stream with `readline` (bytes or text), reading at
    most `limit + 2` items at a time (a line's rest, when it is cut, `chunk` at a time);
    for an iterable of lines without `readline` (already in memory), each line cut.

    Example:
        >>> import io
        >>> list(bounded_lines(io.BytesIO(b"ab\\nabcdef\\nc"), 3))
        [(b'ab\\n', False), (b'abc', True), (b'c', False)]
    """
    readline = getattr(stream, "readline", None)
    if readline is None:
        for line in stream:
            if limit is not None and len(line.rstrip(_ending(line))) > limit:
                yield line[:limit], True
            else:
                yield line, False
        return
    while True:
        line = readline(-1 if limit is None else limit + 2)
        if not line:
            return
        if limit is None or len(line.rstrip(_ending(line))) <= limit:
            yield line, False
            continue
        yield line[:limit], True
        while line and not line.endswith(_ending(line)[-1:]):
            line = readline(chunk)


def _ending(line: AnyStr) -> AnyStr:
    """The line-ending characters, as bytes or text like `line`."""
    return b"\r\n" if isinstance(line, bytes) else "\r\n"  # type: ignore[return-value]


def always_ready() -> bool:
    """The `ready` of input that is all there already (arguments, a text-only stdin)."""
    return True


def utf8_problem(raw: bytes, final: bool = True) -> tuple[str | None, str | None]:
    """`(text, None)` for UTF-8 bytes, `(None, problem)` for others: the problem names the
    reason, the byte offset and the bytes there. `final=False`: `raw` was cut, so an
    unfinished character at its end is dropped rather than refused."""
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(raw, final=final), None
    except UnicodeDecodeError as error:
        return None, (f"is not valid UTF-8 ({error.reason} at byte {error.start}: "
                      f"{raw[error.start:error.start + 4]!r})")


def decoded_lines(reader: LineReader | None, cap: int | None = None) -> Iterator[Line]:
    """Stdin's lines, read lazily as `Line`s: the text without its line ending (and a first
    line without its byte-order mark) and cut to `cap` characters, or None with a
    description of the problem when the line is not valid UTF-8.

    Args:
        reader: stdin's bytes, cut to at least `4 x cap` bytes a line; None reads
            `sys.stdin` as text (an `io.StringIO`), `cap + 2` characters at a time.
        cap: the most characters of a line kept; None keeps whole lines.
    """
    if reader is None:
        for number, (line, cut) in enumerate(bounded_lines(sys.stdin or (), cap), 1):
            text, too_long = _cut(line if cut else line.rstrip("\r\n"), cap)
            yield Line(number, text, None, cut or too_long)
        return
    for number, (raw, cut) in enumerate(reader, 1):
        text, problem = utf8_problem(raw if cut else raw.rstrip(b"\r\n"), final=not cut)
        if text is None:
            yield Line(number, None, problem)
            continue
        text, too_long = _cut(text.removeprefix("\ufeff") if number == 1 else text, cap)
        yield Line(number, text, None, cut or too_long)


def argument_lines(texts: Sequence[str], cap: int | None = None) -> Iterator[Line]:
    """Command-line arguments as `Line`s, numbered from 1 and cut to `cap` characters, as
    stdin's lines are. An argument whose bytes are not UTF-8 (Python decodes `sys.argv` with
    surrogateescape: such bytes become lone surrogates, which no tokenizer takes) fails
    alone: `Line(number, None, problem)`, the problem as for a line of stdin.

    Example:
        >>> good, bad = argument_lines(["A dog.", "ok\\udcff"])
        >>> good
        Line(number=1, text='A dog.', problem=None, cut=False)
        >>> bad.problem
        "is not valid UTF-8 (invalid start byte at byte 2: b'\\\\xff')"
    """
    for number, text in enumerate(texts, 1):
        raw = argument_bytes(text)
        if raw is not None:
            yield Line(number, None, utf8_problem(raw)[1])
            continue
        text, cut = _cut(text, cap)
        yield Line(number, text, None, cut)


def argument_bytes(text: str) -> bytes | None:
    """The bytes of a command-line argument that was not UTF-8 (its lone surrogates turned
    back into the bytes they stand for), or None for an argument that is valid text."""
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a surrogate that no byte made (not from sys.argv)
            return text.encode("utf-8", "surrogatepass")


def _cut(text: str, cap: int | None) -> tuple[str, bool]:
    """`(text cut to cap characters, whether it was longer)`; None: no cut."""
    return (text, False) if cap is None else cut_text(text, cap)


def stdin_lines(cap: int | None = None) -> tuple[Iterator[Line], Callable[[], bool]]:
    """`sys.stdin`'s lines (see `decoded_lines`), each cut to `cap` characters, and the
    `ready` that says whether the next one is there without waiting. Stdin is read as bytes
    where it has a `buffer`, so that each line is decoded alone; its reader keeps at most
    `4 x cap` bytes of a line."""
    binary = getattr(sys.stdin, "buffer", None)
    limit = None if cap is None else cap * UTF8_BYTES_PER_CHARACTER
    reader = None if binary is None else LineReader(binary, limit)
    return decoded_lines(reader, cap), always_ready if reader is None else reader.ready


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
