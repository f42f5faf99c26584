"""One run at a time in a run folder (`zoo.training.files.run_lock`, `hold_run_folder`): a second
start is refused in one line before it touches anything, the folder is free again when the
run ends, and a killed run leaves no stale lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.training.files.run_lock import LOCK_FILE, RunFolderInUse, lock_owner, run_folder_lock
from zoo.training.run import hold_run_folder

RUN_FILES = ("checkpoints", "logs", "model.keras", "metrics.json")
HOLDER = ("import sys, time\n"
          "from zoo.training.run import hold_run_folder\n"
          "with hold_run_folder(sys.argv[1], [], False):\n"
          "    print('held', flush=True)\n"
          "    time.sleep(600)\n")


@pytest.fixture()
def holder():
    """Starts a process that holds a run folder (as a run does) until it is killed."""
    started = []

    def start(folder: Path) -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)],
                                   stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout.readline() == "held\n"
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=60)


def _in_this_process(folder: Path):
    """Holds the folder's lock from this process (another open file: flock(2) refuses it as
    it refuses another process)."""
    lock = run_folder_lock(folder)
    lock.__enter__()
    return lock


@pytest.mark.parametrize("held_by", ["another process", "this process"])
def test_a_second_start_is_refused_in_one_line_before_it_touches_anything(tmp_path, holder,
                                                                          held_by):
    out = tmp_path / "run"
    out.mkdir()
    if held_by == "another process":
        pid = holder(out).pid
    else:
        lock, pid = _in_this_process(out), os.getpid()
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(RunFolderInUse) as refused:
        with hold_run_folder(out, RUN_FILES, force=False):
            pytest.fail("the second run started")
    assert str(refused.value) == (f"{out} is in use by another run (process {pid}); wait until "
                                  "it ends, or choose another --output")
    assert sorted(p.name for p in out.iterdir()) == before == [LOCK_FILE]
    assert lock_owner(out) == pid
    if held_by == "this process":
        lock.__exit__(None, None, None)
        with hold_run_folder(out, RUN_FILES, force=False):  # released: the run starts
            assert lock_owner(out) == os.getpid()


@pytest.mark.parametrize("how", ["the run ends", "the run fails"])
def test_the_folder_is_free_again_when_a_run_ends(tmp_path, how):
    out = tmp_path / "run"
    with pytest.raises(ValueError) if how == "the run fails" else _nothing():
        with hold_run_folder(out, RUN_FILES, force=False) as held:
            assert held == out and (out / LOCK_FILE).exists()
            with pytest.raises(RunFolderInUse):
                _in_this_process(out)
            if how == "the run fails":
                raise ValueError("a failed run")
    assert not (out / LOCK_FILE).exists()  # a run that ended removes its lock file
    with hold_run_folder(out, RUN_FILES, force=False):
        pass


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_run_leaves_no_stale_lock(tmp_path, holder, sig):
    out = tmp_path / "run"
    out.mkdir()
    process = holder(out)
    with pytest.raises(RunFolderInUse):
        _in_this_process(out)
    process.send_signal(sig)
    process.wait(timeout=60)
    # The lock file stays (a killed process removes nothing) and names the dead holder;
    # the lock on it went with the process, and a hidden file does not make the folder
    # foreign to the next run.
    assert (out / LOCK_FILE).exists() and lock_owner(out) == process.pid
    with hold_run_folder(out, RUN_FILES, force=False):
        assert lock_owner(out) == os.getpid()
    assert sorted(p.name for p in out.iterdir()) == []


def test_a_refused_folder_is_not_locked_or_written(tmp_path):
    """A folder with a finished run is refused before a lock file is made in it."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "model.keras").write_text("finished")
    with pytest.raises(FileExistsError, match="finished run"):
        with hold_run_folder(out, RUN_FILES, force=False):
            pass
    assert sorted(p.name for p in out.iterdir()) == ["model.keras"]


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
