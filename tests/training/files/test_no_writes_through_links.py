"""Nothing is written through a symbolic link: every write point of the zoo, given a link
where it writes (planted in a run folder, say), refuses in one line and leaves the link's
target as it was. One row per write point."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from zoo.bench.report import write_results
from zoo.cli.main import main
from zoo.training.errors import UserError
from zoo.training.files.file_store import write_atomically
from zoo.training.files.run_lock import LOCK_FILE, lock_owner, run_folder_lock
from zoo.training.checkpointing import prepare_run_folder

RUN_FILES = ("checkpoints", "logs", "model.keras", "metrics.json")


def _write_atomically(folder: Path, name: str) -> None:
    write_atomically(folder / name, lambda path: path.write_text("new"))


def _lock(folder: Path, name: str) -> None:
    with run_folder_lock(folder):
        pass


def _prepare(folder: Path, name: str, force: bool = False) -> None:
    prepare_run_folder(folder, RUN_FILES, force=force)


WRITE_POINTS = [
    # (id, the name a link is planted as, the write that must refuse it)
    ("write_atomically", "metrics.json", _write_atomically),
    ("run lock", LOCK_FILE, _lock),
    ("run folder: final file", "model.keras", _prepare),
    ("run folder: final file, --force", "metrics.json",
     lambda folder, name: _prepare(folder, name, force=True)),
    ("run folder: checkpoints", "checkpoints", _prepare),
    ("run folder: logs, --force", "logs", lambda folder, name: _prepare(folder, name, True)),
    ("bench results", "bench.json",
     lambda folder, name: write_results({"rates": []}, folder / name)),
]


@pytest.mark.parametrize("name,write", [w[1:] for w in WRITE_POINTS],
                         ids=[w[0] for w in WRITE_POINTS])
def test_a_link_where_the_zoo_writes_is_refused_and_its_target_kept(tmp_path, name, write):
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / name).symlink_to(outside)
    with pytest.raises(UserError, match="is a symbolic link") as caught:
        write(folder, name)
    assert "\n" not in str(caught.value)
    assert str(folder / name) in str(caught.value)
    assert outside.read_text() == "precious"
    assert (folder / name).is_symlink()


def test_a_link_to_a_folder_is_refused_too(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "checkpoints").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UserError, match="symbolic link"):
        prepare_run_folder(folder, RUN_FILES, force=True)
    assert list(elsewhere.iterdir()) == []


def test_lock_owner_does_not_read_through_a_link(tmp_path):
    outside = tmp_path / "pid"
    outside.write_text("4242\n")
    (tmp_path / LOCK_FILE).symlink_to(outside)
    assert lock_owner(tmp_path) is None


def test_zoo_train_with_a_linked_lock_file_is_one_line_and_overwrites_nothing(tmp_path,
                                                                               capsys):
    outside = tmp_path / "notes.txt"
    outside.write_text("precious")
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_FILE).symlink_to(outside)
    status = main(["train", "vit", "--data", str(tmp_path / "no-such-images"),
                   "--output", str(out)])
    err = capsys.readouterr().err
    assert status == 2
    assert err == (f"zoo: error: {out / LOCK_FILE} is a symbolic link; the zoo does not "
                   "write through links (remove it, or choose another path)\n")
    assert outside.read_text() == "precious"


def test_a_device_is_still_written_in_place(tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    try:
        link = tmp_path / "link"
        link.symlink_to(pipe)  # as /dev/stdout links to the terminal or a pipe
        write_atomically(link, lambda path: Path(path).write_text("through"))
        assert os.read(reader, 100) == b"through"
    finally:
        os.close(reader)
