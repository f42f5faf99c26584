"""A save that was killed leaves a hidden temporary file; the next save into the same folder
removes it once its process is gone, and never one of a live process (a save under way)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from zoo.training.files.file_store import remove_dead_temporaries, write_atomically


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.mark.parametrize("name", ["metrics.json", "model.keras", "models.config",
                                  "tokenizer.model"])
def test_the_next_save_removes_a_dead_process_temporary_and_keeps_a_live_one(tmp_path, name):
    stem, dot, suffix = name.partition(".")
    dead = tmp_path / f".{stem}.tmp-{_dead_pid()}-0123456789ab{dot}{suffix}"
    live = tmp_path / f".{stem}.tmp-{os.getppid()}-0123456789ab{dot}{suffix}"
    for path in (dead, live):
        path.write_bytes(b"half a file")
    write_atomically(tmp_path / name, lambda path: path.write_bytes(b"whole"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, live.name])
    assert (tmp_path / name).read_bytes() == b"whole"


def test_a_save_leaves_no_temporary_and_removal_spares_what_is_not_one(tmp_path):
    (tmp_path / ".hidden-notes").write_text("mine")
    (tmp_path / ".a.tmp-notapid-x.json").write_text("mine too")
    write_atomically(tmp_path / "a.json", lambda path: path.write_text("{}"))
    assert remove_dead_temporaries(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [".a.tmp-notapid-x.json",
                                                         ".hidden-notes", "a.json"]
