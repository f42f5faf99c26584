"""Smaller cases of one class each: where a picture goes (a folder, a name without a suffix, a
suffix that is no picture format) and a stdout that cannot write every character (an ASCII or
C locale): one line or a whole result, never a traceback."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.cli.main import utf8_stdout
from zoo.training.errors import UserError
from zoo.recipes.plots import _save

ROOT = Path(__file__).resolve().parents[3]


def _figure():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(1, 1))
    fig.add_subplot().plot([0, 1])
    return fig


PICTURES = [
    # (the name given, what happens: the file's first bytes, or the error and its words)
    ("picture.png", b"\x89PNG"),
    ("picture", b"\x89PNG"),  # no suffix: a PNG (the temporary name had decided it)
    ("picture.svg", b"<?xml"),
    ("picture.xyz", (UserError, "cannot draw a picture as .xyz")),
    ("folder", (IsADirectoryError, "is a folder; give a file name")),
]


@pytest.mark.parametrize("name,outcome", PICTURES, ids=[p[0] for p in PICTURES])
def test_a_picture_path_is_written_whole_or_refused_in_one_line(tmp_path, name, outcome):
    (tmp_path / "folder").mkdir()
    path = tmp_path / name
    if isinstance(outcome, bytes):
        _save(_figure(), path)
        assert path.read_bytes().startswith(outcome)
    else:
        error, words = outcome
        with pytest.raises(error, match=words) as caught:
            _save(_figure(), path)
        assert "\n" not in str(caught.value)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "utf-8"])
def test_stdout_that_cannot_write_every_character_writes_utf8(encoding):
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding)
    utf8_stdout(stream)
    stream.write("Zwei Männer gehen über eine grüne Brücke.\n")
    stream.flush()
    assert raw.getvalue().decode("utf-8") == "Zwei Männer gehen über eine grüne Brücke.\n"


def test_zoo_under_an_ascii_locale_prints_non_ascii_whole():
    code = ("import sys; from zoo.cli.main import utf8_stdout; utf8_stdout(); "
            "print('Brücke')")
    env = dict(os.environ, LC_ALL="C", PYTHONIOENCODING="ascii", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Brücke\n".encode()
