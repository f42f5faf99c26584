"""A `.keras` file (or `.weights.h5` checkpoint) whose weights hold NaN or infinity: such a
model answers `nan` to every input with exit status 0, so `zoo.load`, `load_weights` and every
command that takes a model refuse it in one line naming the file and the first damaged weight,
as hub checkpoints are refused (one check: `zoo.converters._tensors.refuse_non_finite`)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import zoo
from zoo.cli.main import main
from zoo.hub.loader import load_weights
from zoo.models.sentence_encoder.model import SentenceEncoder
from zoo.models.vit.model import VisionTransformer

SMALL_VIT = dict(image_size=16, patch_size=4, num_classes=3, hidden_dim=8, num_layers=1,
                 num_heads=2, intermediate_dim=8, stem_filters=[4])


def _vit() -> VisionTransformer:
    return VisionTransformer(**SMALL_VIT, name="vit")


def _damaged(model: keras.Model, weight: str, value: float, index: int = 0) -> keras.Model:
    """`model` with one value of its weight at path `weight` set to `value`."""
    variable = next(w for w in model.weights if w.path == weight)
    array = keras.ops.convert_to_numpy(variable).copy()
    array.flat[index] = value
    variable.assign(array)
    return model


def _message(path, weight: str) -> str:
    return (f"{path}: weight {weight!r} holds 1 NaN or infinite values; the weights are "
            "damaged")


# One weight of each kind: trainable kernels and biases, tokens and tables, a norm's scale,
# and the stem's batch-norm statistics (not trainable).
WEIGHTS = ["vit/backbone/class_token/class_token",
           "vit/backbone/position_embedding/position_embeddings",
           "vit/backbone/stem/convolution_0/kernel",
           "vit/backbone/stem/batch_norm_0/moving_variance",
           "vit/backbone/encoder_norm/gamma",
           "vit/head/bias"]


def test_the_weights_listed_are_the_models():
    paths = {w.path for w in _vit().weights}
    assert set(WEIGHTS) <= paths


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("weight", WEIGHTS)
def test_a_keras_file_with_a_non_finite_weight_is_refused(weight, value, tmp_path):
    path = tmp_path / "damaged.keras"
    _damaged(_vit(), weight, value, index=0 if weight.endswith("class_token") else 1).save(path)
    with pytest.raises(zoo.UserError) as refused:
        zoo.load(str(path))
    assert str(refused.value) == _message(path, weight)


def test_the_first_damaged_weight_is_named_and_the_good_file_loads(tmp_path):
    model = _vit()
    good = tmp_path / "good.keras"
    model.save(good)
    batch = np.random.default_rng(0).integers(0, 256, (2, 16, 16, 3)).astype("uint8")
    loaded = zoo.load(str(good))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(batch)),
                               keras.ops.convert_to_numpy(model(batch)), rtol=1e-6)
    # The head comes after the position embedding in the model's weights.
    _damaged(model, "vit/head/kernel", np.nan)
    _damaged(model, "vit/backbone/position_embedding/position_embeddings", np.inf)
    bad = tmp_path / "bad.keras"
    model.save(bad)
    with pytest.raises(zoo.UserError) as refused:
        zoo.load(str(bad))
    assert str(refused.value) == _message(
        bad, "vit/backbone/position_embedding/position_embeddings")


def test_another_kind_of_model_is_refused_alike(tmp_path):
    encoder = SentenceEncoder(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=4,
                              intermediate_dim=8, max_positions=8, name="encoder")
    weight = encoder.encoder_blocks[0].weights[0].path
    path = tmp_path / "encoder.keras"
    _damaged(encoder, weight, np.nan).save(path)
    with pytest.raises(zoo.UserError) as refused:
        zoo.load(str(path))
    assert str(refused.value) == _message(path, weight)


@pytest.mark.parametrize("suffix", [".keras", ".weights.h5"])
def test_load_weights_refuses_before_assigning_anything(suffix, tmp_path):
    path = tmp_path / f"damaged{suffix}"
    damaged = _damaged(_vit(), "vit/head/bias", np.nan)
    damaged.save(path) if suffix == ".keras" else damaged.save_weights(path)
    model = _vit()
    before = [keras.ops.convert_to_numpy(w).copy() for w in model.weights]
    with pytest.raises(zoo.UserError) as refused:
        load_weights(model, path)
    assert str(refused.value) == _message(path, "vit/head/bias")
    for kept, weight in zip(before, model.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(weight), kept)


def test_a_command_given_a_damaged_model_says_so_in_one_line(tmp_path, capsys):
    from PIL import Image

    path = tmp_path / "damaged.keras"
    _damaged(_vit(), "vit/head/kernel", np.inf).save(path)
    Image.new("RGB", (8, 8), (200, 30, 30)).save(tmp_path / "image.png")
    status = main(["classify", "--model", str(path), str(tmp_path / "image.png")])
    out, err = capsys.readouterr()
    assert status == 2 and out == "" and "Traceback" not in err
    assert err.splitlines() == [
        f"zoo: error: {_message(path, 'vit/head/kernel')}"]
