"""A Vision Transformer's fine-tuning surgery on the model: `reset_classifier` / `with_new_head`
(a head of the new size, every other weight equal to the old model's), `freeze_blocks` and
`unfreeze` (exactly the frozen layers stay fixed in a fit step), `with_image_size` (the grid
interpolated against numpy's own upsampling, the prefix tokens kept), and a user's bad
argument as one line."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tests.zoo.models.conftest import fit_one_step, images, numpy, tiny
from zoo.models.vit.model import VisionTransformer


def by_path(model: VisionTransformer) -> dict[str, np.ndarray]:
    """Every weight by its path without the model's name."""
    return {w.path.split("/", 1)[1]: numpy(w) for w in model.weights}


# --- a new head ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["reset_classifier", "with_new_head"])
def test_a_new_head_has_the_new_size_and_every_other_weight_is_the_old_models(method):
    model = tiny()  # 5 classes, hidden 16
    before = by_path(model)
    new = getattr(model, method)(3, class_names=["cat", "dog", "emu"])
    assert isinstance(new, VisionTransformer) and new is not model
    assert (new.num_classes, new.class_names) == (3, ["cat", "dog", "emu"])
    old, fresh = by_path(model), by_path(new)
    assert fresh["head/kernel"].shape == (16, 3) and fresh["head/bias"].shape == (3,)
    assert set(fresh) == set(old)
    body = [path for path in old if not path.startswith("head/")]
    assert len(body) == len(old) - 2
    for path in body:
        np.testing.assert_array_equal(fresh[path], old[path], err_msg=path)
    # The model it was called on keeps its own head and weights.
    assert model.num_classes == 5 and old["head/kernel"].shape == (16, 5)
    for path, value in before.items():
        np.testing.assert_array_equal(old[path], value, err_msg=path)
    assert tuple(new(images(2)).shape) == (2, 3)


def test_a_zero_head_predicts_uniformly_and_the_names_alone_set_the_count():
    new = tiny(head_initializer="zeros").reset_classifier(class_names=["a", "b", "c", "d"])
    assert new.num_classes == 4
    probabilities = keras.ops.softmax(new(images(2)))
    np.testing.assert_allclose(numpy(probabilities), 0.25, atol=1e-6)


def test_a_model_with_a_new_head_saves_loads_and_trains(tmp_path):
    new = tiny().reset_classifier(2)
    new.save(tmp_path / "new.keras")
    loaded = keras.saving.load_model(tmp_path / "new.keras")
    assert loaded.num_classes == 2
    np.testing.assert_allclose(numpy(loaded(images(2))), numpy(new(images(2))), atol=1e-6)
    assert np.isfinite(fit_one_step(new, images(4), num_classes=2))


# --- frozen blocks -------------------------------------------------------------------------


def test_freeze_blocks_leaves_exactly_those_blocks_untrainable():
    model = tiny(num_layers=3)
    assert model.freeze_blocks(2) is model
    frozen = [model.patch_embedding, model.position_embedding, model.class_token,
              *model.encoder_blocks[:2]]
    trained = [model.encoder_blocks[2], model.encoder_norm, model.head]
    assert [layer.trainable for layer in frozen] == [False] * len(frozen)
    assert [layer.trainable for layer in trained] == [True] * len(trained)
    expected = {id(w) for layer in trained for w in layer.weights}
    assert {id(w) for w in model.trainable_weights} == expected
    assert len(model.non_trainable_weights) == len(model.weights) - len(expected)


def test_a_fit_step_changes_only_the_trainable_weights():
    model = tiny(num_layers=3).freeze_blocks(1)
    trainable = {w.path for w in model.trainable_weights}
    before = by_path(model)
    fit_one_step(model, images(8), num_classes=5, optimizer=keras.optimizers.Adam(1e-2))
    after = by_path(model)
    prefix = model.name + "/"
    trainable = {path.removeprefix(prefix) for path in trainable}
    assert trainable and set(before) - trainable
    for path in before:
        moved = not np.array_equal(before[path], after[path])
        assert moved == (path in trainable), path


def test_a_linear_probe_then_unfreeze():
    model = tiny().freeze_blocks(2)  # every block: the norm and the head train
    assert {w.path.split("/", 1)[1] for w in model.trainable_weights} == {
        "backbone/encoder_norm/gamma", "backbone/encoder_norm/beta", "head/kernel", "head/bias"}
    assert model.unfreeze() is model
    assert len(model.trainable_weights) == len(model.weights)
    assert all(layer.trainable for layer in model.layers_by_depth()[0])
    model.freeze_blocks(1)
    assert len(model.freeze_blocks(0).trainable_weights) == len(model.weights)


def test_layers_by_depth_are_the_embeddings_each_block_and_the_top():
    model = tiny(num_layers=3, representation_size=8)
    groups = model.layers_by_depth()
    assert len(groups) == 3 + 2
    assert [group[0] for group in groups[1:-1]] == model.encoder_blocks
    assert groups[-1] == [model.encoder_norm, model.representation, model.head]
    # Every layer with weights is in exactly one group.
    grouped = [id(w) for group in groups for layer in group for w in layer.weights]
    assert sorted(grouped) == sorted(id(w) for w in model.weights)


# --- another image size --------------------------------------------------------------------


@pytest.mark.parametrize("distillation_token", [False, True])
def test_with_image_size_upsamples_the_grid_and_keeps_the_prefix_tokens(distillation_token):
    model = tiny(image_size=16, patch_size=8, distillation_token=distillation_token)  # 2x2
    prefix = model.num_prefix_tokens
    old = numpy(model.position_embedding.position_embeddings)
    bigger = model.with_image_size(32, method="nearest")  # 4x4: each position twice per side
    new = numpy(bigger.position_embedding.position_embeddings)
    grid = old[prefix:].reshape(2, 2, 16)
    expected = np.repeat(np.repeat(grid, 2, axis=0), 2, axis=1).reshape(16, 16)
    assert new.shape == (prefix + 16, 16)
    np.testing.assert_allclose(new[prefix:], expected, atol=1e-6)
    np.testing.assert_array_equal(new[:prefix], old[:prefix])
    np.testing.assert_array_equal(numpy(bigger.class_token.weights[0]),
                                  numpy(model.class_token.weights[0]))
    assert tuple(bigger(images(2, size=32)).shape) == (2, 5)


# --- a user's mistake ------------------------------------------------------------------------


@pytest.mark.parametrize("call, message", [
    (lambda m: m.reset_classifier(0), "num_classes must be a positive int; got 0"),
    (lambda m: m.reset_classifier(2.5), "num_classes must be a positive int; got 2.5"),
    (lambda m: m.reset_classifier(), "a new head needs num_classes or class_names; got neither"),
    (lambda m: m.reset_classifier(3, ["a", "b"]), "2 class names for num_classes=3"),
    (lambda m: m.freeze_blocks(3), r"num_blocks must be an int in 0..2 .*; got 3"),
    (lambda m: m.freeze_blocks(-1), r"num_blocks must be an int in 0..2 .*; got -1"),
    (lambda m: m.freeze_blocks(True), r"num_blocks must be an int in 0..2 .*; got True"),
    (lambda m: m.with_image_size(16.5), r"image_size must be a positive int .*; got 16.5"),
    (lambda m: m.with_image_size(18), r"image height 18 .* multiple of patch_size 4"),
])
def test_a_bad_argument_is_one_line_naming_it(call, message):
    model = tiny()
    with pytest.raises(ValueError, match=message) as caught:
        call(model)
    assert "\n" not in str(caught.value)
    assert model.num_classes == 5 and len(model.trainable_weights) == len(model.weights)
