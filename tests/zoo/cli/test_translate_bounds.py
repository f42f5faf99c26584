"""`zoo translate` in bounded memory, and arguments that are not UTF-8.

Each stdin line and TEXT argument is cut to the model's `source_character_cap` characters
before it is tokenized (a warning names it); the stdin reader keeps at most 4 bytes a
character of a line and drops the rest as it reads, so an endless line (`< /dev/zero`) is
answered at once at constant memory. A TEXT that is not UTF-8 fails alone, as a stdin line
does (status 1); any other argument that is not UTF-8 is one line and status 2.
"""

from __future__ import annotations

import io
import os
import threading
import tracemalloc

import pytest

from tests.zoo.cli.test_cli_bad_input import T, files, repository, run  # noqa: F401
from zoo.cli.line_reader import LineReader
from zoo.cli.main import main

# ------------------------------------------------------------------ the reader, alone
DATA = b"short\nexactly8\n" + b"x" * 20 + b"\nafter\r\n" + b"y" * 30
EXPECTED = [(b"short\n", False), (b"exactly8\n", False), (b"x" * 8, True),
            (b"after\r\n", False), (b"y" * 8, True)]


def _pipe_with(data: bytes):
    """A binary file over a pipe that a thread fills with `data`, then closes."""
    read_fd, write_fd = os.pipe()

    def fill():
        os.write(write_fd, data)
        os.close(write_fd)

    threading.Thread(target=fill, daemon=True).start()
    return open(read_fd, "rb", buffering=0)


STREAMS = {
    "a pipe (os.read and select)": _pipe_with,
    "a stream with readline": io.BytesIO,
    "an iterable of lines": lambda data: iter(io.BytesIO(data).readlines()),
}


@pytest.mark.parametrize("kind", STREAMS)
def test_a_line_over_the_limit_is_cut_and_its_rest_dropped(kind):
    assert list(LineReader(STREAMS[kind](DATA), limit=8)) == EXPECTED


def test_an_endless_line_is_handed_on_at_once_and_read_on_at_constant_memory():
    """As `< /dev/zero`: the cut line comes after the first chunks, before the writer is
    done; `ready()` is False while its rest is dropped; 64 MB of it are read through with
    less than 1 MB held, and the line after it is read as usual."""
    read_fd, write_fd = os.pipe()
    block, blocks, written = b"\0" * (1 << 20), 64, []

    def endless():
        for _ in range(blocks):
            os.write(write_fd, block)
            written.append(len(block))
        os.write(write_fd, b"\nA dog.\n")
        os.close(write_fd)

    writer = threading.Thread(target=endless, daemon=True)
    tracemalloc.start()
    try:
        writer.start()
        reader = LineReader(open(read_fd, "rb", buffering=0), limit=4096)
        lines = iter(reader)
        assert next(lines) == (b"\0" * 4096, True)
        assert len(written) < blocks and not reader.ready()
        assert next(lines) == (b"A dog.\n", False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        writer.join(30)
    assert sum(written) == blocks << 20 and peak < 1 << 20, peak


# ------------------------------------------------------------------ zoo translate
@pytest.fixture()
def loaded(repository, monkeypatch):
    """`zoo.load` gives the test translator that is already in memory, as loading its file
    would (its searches are traced once for all these tests, not once a command)."""
    import zoo

    _, translator = repository

    def load(name, expect=None):
        assert name == "translator-test" and isinstance(translator, expect)
        return translator

    monkeypatch.setattr(zoo, "load", load, raising=False)
    return repository


class _EndlessStdin:
    """A stdin whose one line is `size` NUL bytes, made as they are read, then a sentence;
    it records the most bytes any read asked for."""

    def __init__(self, size: int, after: bytes):
        self.left, self.largest = size, 0
        self.after = after.splitlines(keepends=True)

    @property
    def buffer(self):
        return self

    def readline(self, size: int = -1) -> bytes:
        assert size > 0, "a read without a bound"
        self.largest = max(self.largest, size)
        if self.left:
            part = min(size, self.left)
            self.left -= part
            return b"\0" * part
        return self.after.pop(0) if self.after else b""


def test_an_endless_line_on_stdin_is_cut_with_a_warning(loaded, monkeypatch, capsys):
    _, translator = loaded
    cap = translator.source_character_cap
    stdin = _EndlessStdin(8 << 20, b"\nA dog runs.\n")
    monkeypatch.setattr("sys.stdin", stdin)
    assert main([*T, "--beam-size", "1", "--max-length", "4"]) == 0
    out, err = capsys.readouterr()
    # Read to its end, in reads of at most 4 bytes a character kept or one chunk dropped.
    assert stdin.left == 0 and stdin.largest <= max(4 * cap + 2, LineReader.CHUNK)
    assert out.split("\n") == [*translator.translate(["\0" * cap, "A dog runs."],
                                                     beam_size=1, max_length=4), ""]
    assert (f"zoo: warning: line 1 of stdin is longer than {cap:,} characters; only its "
            f"first {cap:,} are translated (the model reads at most "
            f"{translator.max_source_length} tokens of a sentence)") in err.splitlines()


def test_an_endless_line_on_a_pipe_is_answered_before_it_ends(loaded, monkeypatch):
    """`zoo translate < /dev/zero` answers: the cut line's translation is written while the
    line is still coming."""
    _, translator = loaded
    read_fd, write_fd = os.pipe()
    answered = threading.Event()

    class Stdout(io.StringIO):
        def flush(self):
            if self.getvalue().count("\n") >= 1:
                answered.set()

    outcome = {}

    def endless():
        block = b"\0" * (1 << 16)
        for _ in range(64):  # 4 MB at most: 500 times what the reader may hold
            if answered.is_set():
                break
            os.write(write_fd, block)
        outcome["answered"] = answered.is_set()
        os.write(write_fd, b"\nA cat sleeps.\n")
        os.close(write_fd)

    stdout = Stdout()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(open(read_fd, "rb"), "utf-8"))
    monkeypatch.setattr("sys.stdout", stdout)
    writer = threading.Thread(target=endless)
    writer.start()
    try:
        assert main([*T, "--beam-size", "1", "--max-length", "4"]) == 0
    finally:
        answered.set()
        writer.join()
    assert outcome["answered"], "the endless line was not answered before it ended"
    cap = translator.source_character_cap
    assert stdout.getvalue().split("\n") == [*translator.translate(
        ["\0" * cap, "A cat sleeps."], beam_size=1, max_length=4), ""]


CAP = 2048  # the test translator's: max_source_length 32 x 16 x 4
LONG = "A dog runs on the beach. " * 400  # 10,000 characters
# (name, TEXT arguments or None, stdin bytes or None, status, the texts translated (by the
#  Python API; None: an empty line), stderr's lines)
CASES = [
    ("a TEXT that is not UTF-8 fails alone", ["ok\udcff", "A dog runs."], None, 1,
     [None, "A dog runs."],
     ["zoo: warning: argument 1 is not valid UTF-8 (invalid start byte at byte 2: "
      "b'\\xff'); its output line is empty",
      "zoo: error: 1 of 2 arguments were not valid UTF-8; their output lines are empty"]),
    ("a long TEXT is cut", ["A dog.", LONG], None, 0, ["A dog.", LONG[:CAP]],
     [f"zoo: warning: argument 2 is longer than {CAP:,} characters; only its first "
      f"{CAP:,} are translated (the model reads at most 32 tokens of a sentence)"]),
    ("a long stdin line is cut", None, f"A dog.\n{LONG}\nA cat.\n".encode(), 0,
     ["A dog.", LONG[:CAP], "A cat."],
     [f"zoo: warning: line 2 of stdin is longer than {CAP:,} characters; only its first "
      f"{CAP:,} are translated (the model reads at most 32 tokens of a sentence)"]),
    ("a long stdin line of 3-byte characters", None, ("\u20ac" * 9000 + "\n").encode(), 0,
     ["\u20ac" * CAP],
     [f"zoo: warning: line 1 of stdin is longer than {CAP:,} characters; only its first "
      f"{CAP:,} are translated (the model reads at most 32 tokens of a sentence)"]),
    ("a long stdin line that is not UTF-8", None, b"ok\xff" + b"x" * 20_000 + b"\nA cat.\n",
     1, [None, "A cat."],
     ["zoo: warning: line 1 of stdin is not valid UTF-8 (invalid start byte at byte 2: "
      "b'\\xffxxx'); its output line is empty",
      "zoo: error: 1 of 2 lines of stdin were not valid UTF-8; their output lines are empty"]),
]


@pytest.mark.parametrize("name, texts, stdin, status, translated, messages", CASES,
                         ids=[case[0] for case in CASES])
def test_long_and_undecodable_inputs(name, texts, stdin, status, translated, messages,
                                     loaded, monkeypatch, capsys):
    _, translator = loaded
    assert translator.source_character_cap == CAP
    got, out, err = run([*T, "--beam-size", "1", "--max-length", "4", *(texts or [])], stdin,
                        monkeypatch, capsys)
    assert got == status, err
    assert "Traceback" not in err
    expected = translator.translate([text or "" for text in translated], beam_size=1,
                                    max_length=4)
    assert out.split("\n") == [*expected, ""]
    assert all(line == "" for line, text in zip(expected, translated) if text is None)
    ours = [line for line in err.splitlines() if "max_length=" not in line]  # (the tokenizer's)
    assert ours == messages


# ------------------------------------------------------------------ other commands
# (name, argv with {dir} for the test folder and \udcff for a byte 0xff, the flag named)
NOT_UTF8 = [
    ("export --output", ["export", "translator-test", "--output", "{dir}/out\udcff"],
     "--output {dir}/out\\xff"),
    ("evaluate --source", ["evaluate", "translator", "--model", "translator-test", "--source",
                           "{dir}/three\udcff.en", "--reference", "{dir}/two.de"],
     "--source {dir}/three\\xff.en"),
    ("train --data", ["train", "vit", "--data", "{dir}/images\udcff", "--output",
                      "{dir}/run"], "--data {dir}/images\\xff"),
    ("train --output", ["train", "vit", "--data", "{dir}/images", "--output",
                        "{dir}/run\udcff"], "--output {dir}/run\\xff"),
    ("convert SOURCE", ["convert", "hf-vit", "{dir}/vit\udcff", "--output", "{dir}/c"],
     "SOURCE {dir}/vit\\xff"),
    ("translate --model", ["translate", "--model", "translator\udcff", "hi"],
     "--model translator\\xff"),
    ("classify --attention", ["classify", "--model", "vit-test", "--attention",
                              "{dir}/a\udcff.png", "{dir}/good.png"],
     "--attention {dir}/a\\xff.png"),
]


@pytest.mark.parametrize("name, argv, named", NOT_UTF8, ids=[case[0] for case in NOT_UTF8])
def test_an_argument_that_is_not_utf8_is_one_line(name, argv, named, repository, monkeypatch,
                                                  capsys):
    root, _ = repository
    argv = [a.format(dir=root) for a in argv]
    if name == "evaluate --source":
        # Two lines, as the reference has: without the check the command would succeed.
        (root / "three\udcff.en").write_text("A dog runs.\nTwo men talk.\n")
    status, out, err = run(argv, None, monkeypatch, capsys)
    named = named.format(dir=root)
    before, after = named.split(" ", 1)[1].split("\\xff")
    assert (status, out) == (2, "")
    assert err.splitlines() == [  # the bad byte's offset and the (at most 4) bytes there
        f"zoo: error: {named} is not valid UTF-8 (invalid start byte at byte "
        f"{len(before.encode())}: b'\\xff{after[:3]}'); the zoo takes paths and names in "
        "UTF-8"]


def test_an_image_whose_name_is_not_utf8_is_classified(repository, monkeypatch, capsys):
    """PIL opens it; its name is printed with the byte as an escape where stdout cannot
    write it back (here: a strict UTF-8 stdout)."""
    root, _ = repository
    image = root / "img\udcff.png"
    image.write_bytes((root / "good.png").read_bytes())
    status, out, err = run(["classify", "--model", "vit-test", "--top-k", "2", str(image)],
                           None, monkeypatch, capsys)
    assert status == 0, err
    assert [line.split("\t")[0] for line in out.splitlines()] == [f"{root}/img\\xff.png"] * 2
