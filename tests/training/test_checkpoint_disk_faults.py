"""A checkpoint under a full or read-only disk (`zoo.training.files.disk_faults`) names the epoch's
folder in its error and leaves no part of it: the previous checkpoint stays the newest."""

from __future__ import annotations

import errno

import keras
import numpy as np
import pytest

from tests.training.files.test_disk_faults import _fault, _half_then
from zoo.training.checkpointing import ResumableCheckpoint, restore_latest


def _fails_while_writing(monkeypatch, code):
    monkeypatch.setattr(np, "savez", lambda path, **arrays: _half_then(_fault(code))(path))


def _disk_already_full(monkeypatch, code):
    """Less room than the checkpoint needs: refused before HDF5 writes (which crashes the
    process on a disk that fills up under it)."""
    import collections
    import shutil

    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 4096, 4096))

    def never(*args, **kwargs):
        raise AssertionError("save_weights ran on a full disk")

    monkeypatch.setattr(keras.Model, "save_weights", never)


@pytest.mark.parametrize("fault, code", [
    (_fails_while_writing, errno.ENOSPC), (_fails_while_writing, errno.EROFS),
    (_disk_already_full, errno.ENOSPC)], ids=["ENOSPC", "EROFS", "disk already full"])
def test_a_checkpoint_under_a_disk_fault_names_it_and_leaves_no_part(tmp_path, fault, code,
                                                                     monkeypatch):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    x, y = np.zeros((4, 2)), np.zeros((4, 1))
    callback = ResumableCheckpoint(tmp_path, keep=2)
    model.fit(x, y, epochs=1, callbacks=[callback], verbose=0)
    fault(monkeypatch, code)
    with pytest.raises(OSError) as raised:
        model.fit(x, y, epochs=2, initial_epoch=1, callbacks=[callback], verbose=0)
    assert (raised.value.errno, raised.value.filename) == (code, str(tmp_path / "epoch-0002"))
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-0001"]
    assert restore_latest(model, tmp_path) == 1  # the previous checkpoint is the newest
