"""No write of the zoo truncates a file that has other hard links, or that it did not make:
`O_NOFOLLOW` stops symbolic links only, so a hard link planted where the zoo writes (a run
folder's `.run.lock`, an output named with --force) must either be refused or replaced by a
rename, which leaves the user's file under its other name as it was. One row per write point."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from zoo.training.errors import UserError
from zoo.training.files.file_store import write_atomically
from zoo.training.files.run_lock import LOCK_FILE, run_folder_lock


def _lock(path: Path) -> None:
    with run_folder_lock(path.parent):
        pass


def _tokenizer(path: Path) -> None:
    from zoo.text.tokenizer import SubwordTokenizer

    SubwordTokenizer.train(["a dog runs", "ein hund"] * 4, vocabulary_size=40).save(
        path, overwrite=True)


def _pipeline(path: Path) -> None:
    pytest.importorskip("apache_beam")
    from zoo.pipelines.corpus import _write_in_order

    _write_in_order([(1, ["eins"])], str(path))


# (id, the name the hard link is planted as, the write, whether it is refused (else the
# write replaces the name by a rename))
WRITE_POINTS = [
    ("run lock", LOCK_FILE, _lock, True),
    ("write_atomically", "metrics.json",
     lambda path: write_atomically(path, lambda p: p.write_text("new")), False),
    ("tokenizer save, overwrite", "vocab.subwords", _tokenizer, False),
    ("pipeline output, --force", "out.de", _pipeline, False),
]


@pytest.mark.parametrize("name, write, refused", [w[1:] for w in WRITE_POINTS],
                         ids=[w[0] for w in WRITE_POINTS])
def test_a_hard_link_where_the_zoo_writes_keeps_the_users_file(tmp_path, name, write, refused):
    users = tmp_path / "notes.txt"
    users.write_text("precious\n")
    folder = tmp_path / "run"
    folder.mkdir()
    os.link(users, folder / name)
    if refused:
        with pytest.raises(UserError, match="not a lock file the zoo made") as caught:
            write(folder / name)
        assert "\n" not in str(caught.value) and str(folder / name) in str(caught.value)
    else:
        write(folder / name)
        assert not os.path.samefile(users, folder / name)
    assert users.read_text() == "precious\n"


@pytest.mark.parametrize("content", [b"my notes\n", b"12345678901234567890" * 4, b"\x00" * 8])
def test_a_lock_file_the_zoo_did_not_make_is_refused(tmp_path, content):
    (tmp_path / LOCK_FILE).write_bytes(content)
    with pytest.raises(UserError, match="not a lock file the zoo made"):
        _lock(tmp_path / LOCK_FILE)
    assert (tmp_path / LOCK_FILE).read_bytes() == content


@pytest.mark.parametrize("content", [b"", b"4242\n"])
def test_a_lock_file_a_run_left_is_taken(tmp_path, content):
    """A run killed between writing and removing its lock file leaves one: still free."""
    (tmp_path / LOCK_FILE).write_bytes(content)
    with run_folder_lock(tmp_path):
        assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    assert not (tmp_path / LOCK_FILE).exists()
