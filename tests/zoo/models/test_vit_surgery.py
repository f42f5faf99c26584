"""New Vision Transformers made from a built one, and training them: `with_image_size`
(position embeddings interpolated, everything else kept; non-square grids),
`with_training_options` (dropout and precision changed, weights kept), `prune_heads` (equal to
the model whose pruned heads output zero; saved, reloaded, pruned again, trained), and a fit
step under mixed precision with float32 logits.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tests.zoo.models.conftest import (
    TINY,
    copy_of,
    fit_one_step,
    images,
    numpy,
    tiny,
    zero_output_rows,
)
from zoo.models.vit.model import VisionTransformer


# --- image size change ----------------------------------------------------------------------


def test_with_same_image_size_gives_identical_outputs():
    model = tiny()
    x = images(2)
    np.testing.assert_array_equal(numpy(model.with_image_size(16)(x)), numpy(model(x)))


def test_with_larger_image_size_interpolates_positions_and_keeps_the_rest():
    model = tiny(image_size=32, patch_size=8)                   # 4x4 grid
    bigger = model.with_image_size(64)                          # 8x8 grid
    assert bigger.grid_size == (8, 8) and bigger.image_size == 64
    old = numpy(model.position_embedding.position_embeddings)
    new = numpy(bigger.position_embedding.position_embeddings)
    assert new.shape == (1 + 64, 16)
    np.testing.assert_array_equal(new[0], old[0])                # the class token's row
    # A constant grid stays constant (interpolation weights sum to 1).
    constant = copy_of(model)
    table = np.concatenate([old[:1], np.full((16, 16), 0.3, "float32")])
    constant.position_embedding.position_embeddings.assign(table)
    np.testing.assert_allclose(
        numpy(constant.with_image_size(64).position_embedding.position_embeddings)[1:], 0.3,
        atol=1e-5)
    for a, b in zip(model.encoder_blocks[1].weights, bigger.encoder_blocks[1].weights):
        np.testing.assert_array_equal(numpy(a), numpy(b))
    logits = numpy(bigger(images(2, size=64)))
    assert logits.shape == (2, 5) and np.all(np.isfinite(logits))


def test_non_square_images():
    model = tiny(image_size=(16, 24))
    assert model.grid_size == (4, 6) and model.image_shape == (16, 24, 3)
    x = np.random.default_rng(0).integers(0, 256, (2, 16, 24, 3)).astype("uint8")
    assert tuple(model(x).shape) == (2, 5)
    assert model.attention_rollout(x).shape == (2, 4, 6)
    taller = model.with_image_size((24, 16))
    assert taller.grid_size == (6, 4)
    assert taller.position_embedding.sequence_length == 1 + 24


def test_model_moved_to_a_larger_image_size_trains():
    bigger = tiny(image_size=32, patch_size=8).with_image_size(64)
    before = numpy(bigger.position_embedding.position_embeddings)
    loss = fit_one_step(bigger, images(4, size=64), num_classes=5)
    assert np.isfinite(loss)
    assert not np.allclose(numpy(bigger.position_embedding.position_embeddings), before)


def test_with_training_options_changes_dropout_and_precision_and_keeps_the_weights():
    model = tiny()
    x = images(4)
    changed = model.with_training_options(dropout=0.3, dtype="mixed_bfloat16")
    assert changed.dropout == 0.3 and changed.get_config()["dropout"] == 0.3
    assert changed.encoder_blocks[0].dtype_policy.name == "mixed_bfloat16"
    assert changed.encoder_blocks[0].compute_dtype == "bfloat16"
    for a, b in zip(model.weights, changed.weights):  # float32 variables, copied exactly
        assert b.dtype == "float32"
        np.testing.assert_array_equal(numpy(a), numpy(b))
    # In inference the new model computes what the old one does, to bfloat16's precision.
    np.testing.assert_allclose(numpy(changed(x)), numpy(model(x)), rtol=0.05, atol=0.1)
    # Dropout now acts in training (the old model, dropout 0, gives its inference output).
    np.testing.assert_array_equal(numpy(model(x, training=True)), numpy(model(x)))
    assert not np.allclose(numpy(changed(x, training=True)), numpy(changed(x)), atol=0.1)
    kept = model.with_training_options(attention_dropout=0.2)
    assert (kept.dropout, kept.attention_dropout) == (0.0, 0.2)
    assert kept.encoder_blocks[0].dtype_policy.name == model.encoder_blocks[0].dtype_policy.name
    with pytest.raises(ValueError, match="dropout must lie in \\[0, 1\\); got 1.5"):
        model.with_training_options(dropout=1.5)


# --- head pruning ---------------------------------------------------------------------------


def test_pruned_model_equals_the_model_with_zeroed_head_outputs():
    model = tiny()
    x = images(2)
    heads = {0: [1, 3], 1: [0]}
    reference = zero_output_rows(model, heads)
    full_count = model.count_params()
    unpruned = numpy(model(x))
    pruned = model.prune_heads(heads)
    assert isinstance(pruned, VisionTransformer) and pruned is not model
    assert pruned.get_config()["pruned_heads"] == {0: [1, 3], 1: [0]}
    assert [b.self_attention.num_heads for b in pruned.encoder_blocks] == [2, 3]
    assert [b.self_attention.key_dim for b in pruned.encoder_blocks] == [4, 4]
    # Per head: q, k, v kernels (16 x 4) and biases (4), and 4 rows of the output kernel.
    assert full_count - pruned.count_params() == 3 * (4 * 16 * 4 + 3 * 4)
    np.testing.assert_allclose(numpy(pruned(x)), numpy(reference(x)), atol=1e-5)
    # The model pruned from is left as it was.
    assert model.pruned_heads == {} and model.count_params() == full_count
    np.testing.assert_array_equal(numpy(model(x)), unpruned)


def test_pruned_heads_config_builds_the_smaller_attention_directly():
    """A config with `pruned_heads` (as saved, JSON keys are strings) builds each block's
    attention with the heads left, at the unpruned head size."""
    model = VisionTransformer.from_config(
        {**tiny().get_config(), "pruned_heads": {"0": [3, 1], "1": []}})
    assert model.pruned_heads == {0: [1, 3]}
    attention = [b.self_attention for b in model.encoder_blocks]
    assert [(a.num_heads, a.key_dim) for a in attention] == [(2, 4), (4, 4)]
    assert tuple(attention[0].query_dense.kernel.shape) == (16, 2, 4)
    assert tuple(attention[0].output_dense.kernel.shape) == (2, 4, 16)


def test_pruning_again_uses_the_original_head_numbers():
    model = tiny()
    x = images(2)
    reference = zero_output_rows(model, {0: [1, 2, 3]})
    once = model.prune_heads({0: [3]})
    assert once.pruned_heads == {0: [3]}
    model = once.prune_heads({0: [1, 2, 3]})  # 3 is already gone and skipped
    assert model.pruned_heads == {0: [1, 2, 3]}
    assert model.encoder_blocks[0].self_attention.num_heads == 1
    np.testing.assert_allclose(numpy(model(x)), numpy(reference(x)), atol=1e-5)


def test_pruned_model_saves_loads_and_changes_size(tmp_path):
    model = tiny().prune_heads({1: [0, 2]})
    model.save(tmp_path / "pruned.keras")
    loaded = keras.saving.load_model(tmp_path / "pruned.keras")
    assert loaded.pruned_heads == {1: [0, 2]}
    x = images(2)
    np.testing.assert_allclose(numpy(loaded(x)), numpy(model(x)), atol=1e-6)
    bigger = model.with_image_size(32)
    assert bigger.encoder_blocks[1].self_attention.num_heads == 2
    assert tuple(bigger(images(1, size=32)).shape) == (1, 5)


@pytest.mark.slow
def test_pruned_model_trains_after_compiling_again():
    model = tiny()
    fit_one_step(model, images(4), num_classes=5)
    model = model.prune_heads({0: [0]})
    assert np.isfinite(fit_one_step(model, images(4), num_classes=5))


@pytest.mark.parametrize("heads, match", [
    ({2: [0]}, "block index 2"), ({0: [4]}, r"\[4\]"), ({0: [0, 1, 2, 3]}, "all 4 heads"),
])
def test_prune_heads_rejects_bad_requests(heads, match):
    model = tiny()
    with pytest.raises(ValueError, match=match):
        model.prune_heads(heads)
    assert model.pruned_heads == {}
    with pytest.raises(ValueError, match=match):  # the same checks for a config
        VisionTransformer(**TINY, pruned_heads=heads)


# --- mixed precision ------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_fit_step_and_float32_logits(policy):
    if policy == "mixed_float16" and keras.backend.backend() == "jax":
        import jax

        if jax.default_backend() == "cpu":
            pytest.skip("JAX on CPU cannot compile float16 dot products with float32 "
                        "accumulation (keras.ops.dot_product_attention under jit)")
    model = tiny(dtype=policy)
    assert model.encoder_blocks[0].compute_dtype == policy.split("_")[1]
    logits = model(images(2))
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    before = numpy(model.head.kernel)
    optimizer = keras.optimizers.Adam(1e-3)
    if policy == "mixed_float16":
        # Keras' default initial loss scale (2**15) overflows this model's float16 gradients
        # for the first few steps, which are then skipped; start lower to update at once.
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer, initial_scale=2.0**8)
    loss = fit_one_step(model, images(4), num_classes=5, optimizer=optimizer)
    assert np.isfinite(loss)
    assert all(np.all(np.isfinite(numpy(w))) for w in model.weights)
    assert not np.allclose(numpy(model.head.kernel), before)
    maps = model.attention_maps(images(1))
    np.testing.assert_allclose(maps[0].sum(axis=-1), 1.0, atol=1e-5)  # softmax in float32
