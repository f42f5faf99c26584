"""`zoo train` into a folder another run holds: one line naming the folder and the run's
process, exit status 2, nothing of the folder touched; the run starts once the other ends."""

from __future__ import annotations

import os

import pytest

from zoo.cli.main import main
from zoo.training.files.run_lock import LOCK_FILE, run_folder_lock

CASES = [
    # (the command; {out} is the run folder)
    ["train", "vit", "--data", "{tmp}/no-such-images", "--output", "{out}"],
    ["train", "translator", "--output", "{out}", "--source", "{tmp}/no.en",
     "--target", "{tmp}/no.de"],
    ["finetune", "vit", "--model", "vit-cifar10", "--data", "{tmp}/no-such-images",
     "--output", "{out}"],
]


@pytest.mark.parametrize("argv", CASES, ids=[" ".join(c[:2]) for c in CASES])
def test_a_run_into_a_held_folder_is_one_line_and_touches_nothing(argv, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "checkpoints").mkdir()  # an unfinished run's: the second run would resume it
    argv = [a.format(tmp=tmp_path, out=out) for a in argv]
    with run_folder_lock(out):
        status = main(argv)
        err = capsys.readouterr().err
        assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE, "checkpoints"]
        assert list((out / "checkpoints").iterdir()) == []
    assert err == (f"zoo: error: {out} is in use by another run (process {os.getpid()}); "
                   "wait until it ends, or choose another --output\n")
    assert status == 2
    # Released: the same command gets past the lock (and fails on its missing data).
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 2, err
    assert "in use by another run" not in err
    assert "no-such-images" in err or "no.en" in err, err
    assert not (out / LOCK_FILE).exists()
