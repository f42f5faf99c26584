"""A command that fails leaves no folder it made: no empty `serving/<name>/` after a failed
export, no empty run folder after a training run whose data does not decode, no empty model
folder after a failed `zoo quantize` or `zoo convert` save. A folder that was there before
stays."""

from __future__ import annotations

import errno

import keras
import numpy as np
import pytest

import zoo.serving.export as export
from zoo.cli.main import main
from zoo.models.vit.model import VisionTransformer


@pytest.fixture(scope="module")
def tiny_vit(tmp_path_factory):
    keras.utils.set_random_seed(0)
    model = VisionTransformer(image_size=16, patch_size=8, num_classes=2, hidden_dim=16,
                              num_layers=1, num_heads=2, intermediate_dim=16)
    model(np.zeros((1, 16, 16, 3), "uint8"))
    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    model.save(path)
    return str(path)


class _FailingArchive:
    """Stands in for the export archive: writing fails (as the warm-up records did when they
    needed tensorflow-serving-api)."""

    def write_out(self, path, verbose=False):
        raise ModuleNotFoundError("No module named 'tensorflow_serving'",
                                  name="tensorflow_serving")


@pytest.mark.parametrize("existing", [False, True])
def test_a_failed_export_leaves_no_folder(tiny_vit, tmp_path, monkeypatch, capsys, existing):
    monkeypatch.setattr(export, "_archive", lambda *args: (_FailingArchive(), {}, {}))
    serving = tmp_path / "serving"
    if existing:
        serving.mkdir()
    assert main(["export", tiny_vit, "--output", str(serving)]) == 2
    assert "tensorflow_serving" in capsys.readouterr().err
    if existing:  # the user's folder stays, and holds nothing new
        assert serving.is_dir() and not list(serving.iterdir())
    else:
        assert not serving.exists()


def test_a_run_whose_data_fails_leaves_no_run_folder(tmp_path, capsys):
    for name in ("a", "b"):
        (tmp_path / "data" / name).mkdir(parents=True)
        (tmp_path / "data" / name / "0.jpg").write_bytes(b"not an image")
    out = tmp_path / "runs" / "vit"
    assert main(["train", "vit", "--data", str(tmp_path / "data"), "--architecture",
                 "vit-cifar-tiny", "--epochs", "1", "--output", str(out)]) == 2
    assert "cannot decode" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_failed_quantize_save_leaves_no_model_folder(tiny_vit, tmp_path, monkeypatch,
                                                        capsys):
    def no_space(self, path, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(keras.Model, "save", no_space)
    folder = tmp_path / "models" / "vit-int8"
    assert main(["quantize", tiny_vit, "--output", str(folder)]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert not (tmp_path / "models").exists()
