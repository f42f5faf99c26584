"""The Vision Transformer: architecture, presets, save/load, resolution change, inference
helpers (classify, attention maps and rollout), head pruning and mixed precision."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops
from keras.src.backend.common import global_state

from zoo.models.vit.attention_rollout import attention_rollout
from zoo.models.vit.image_batch import as_image_batch
from zoo.models.vit.model import VisionTransformer
from zoo.models.architectures import architectures

TINY = dict(image_size=16, patch_size=4, num_classes=5, hidden_dim=16, num_layers=2,
            num_heads=4, intermediate_dim=32, head_initializer="glorot_uniform")


def tiny(**overrides) -> VisionTransformer:
    """A 16 px model (4x4 grid, 17 tokens) whose head is not zero, so logits say something."""
    return VisionTransformer(**{**TINY, **overrides})


def images(n: int = 2, size: int = 16, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3)).astype("uint8")


def numpy(x) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(x))


def copy_of(model: VisionTransformer, **config) -> VisionTransformer:
    clone = VisionTransformer.from_config({**model.get_config(), **config})
    clone.set_weights(model.get_weights())
    return clone


def fit_one_step(model: VisionTransformer, x: np.ndarray, num_classes: int,
                 optimizer: keras.optimizers.Optimizer | None = None) -> float:
    model.compile(optimizer=optimizer or keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    y = np.arange(len(x)) % num_classes
    history = model.fit(x, y, batch_size=len(x), epochs=1, verbose=0)
    return float(history.history["loss"][0])


# --- architecture ---------------------------------------------------------------------------


@pytest.mark.parametrize("pooling", ["cls", "gap"])
def test_logits_shape_and_dtype(pooling):
    model = tiny(pooling=pooling)
    logits = model(images(3))
    assert tuple(logits.shape) == (3, 5)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    assert np.all(np.isfinite(numpy(logits)))
    # "gap" has no class token: 16 patch positions only.
    assert model.position_embedding.sequence_length == (17 if pooling == "cls" else 16)


def test_matches_keras_hub_vit_backbone_with_copied_weights():
    """keras-hub's ViTBackbone (written by others) with our weights gives our features."""
    pytest.importorskip("keras_hub")
    from keras_hub.src.models.vit.vit_backbone import ViTBackbone

    model = tiny()
    # Non-trivial class token and biases, so that copying errors show.
    for weight in model.weights:
        if np.all(numpy(weight) == 0):
            weight.assign(np.random.default_rng(1).normal(0, 0.1, weight.shape))
    reference = ViTBackbone(image_shape=(16, 16, 3), patch_size=4, num_layers=2, num_heads=4,
                            hidden_dim=16, mlp_dim=32, layer_norm_epsilon=1e-6)
    embed = reference.get_layer("vit_patching_and_embedding")
    embed.patch_embedding.set_weights(model.patch_embedding.projection.get_weights())
    embed.class_token.assign(model.class_token.class_token)
    embed.position_embedding.set_weights([numpy(model.position_embedding.position_embeddings)])
    encoder = reference.get_layer("vit_encoder")
    for theirs, ours in zip(encoder.encoder_layers, model.encoder_blocks):
        theirs.layer_norm_1.set_weights(ours.self_attention_norm.get_weights())
        for name in ("query", "key", "value", "output"):
            source = getattr(ours.self_attention, f"{name}_dense" if name != "output"
                             else "output_dense")
            getattr(theirs.mha, f"_{name}_dense").set_weights(source.get_weights())
        theirs.layer_norm_2.set_weights(ours.feed_forward_norm.get_weights())
        theirs.mlp.dense_1.set_weights(ours.feed_forward.intermediate_dense.get_weights())
        theirs.mlp.dense_2.set_weights(ours.feed_forward.output_dense.get_weights())
    encoder.layer_norm.set_weights(model.encoder_norm.get_weights())

    x = images(2)
    features = numpy(reference(x.astype("float32") / 127.5 - 1.0))[:, 0]  # class token
    kernel, bias = model.head.get_weights()
    np.testing.assert_allclose(numpy(model(x)), features @ kernel + bias, atol=1e-4)


def test_rescaling_maps_0_255_to_minus_one_one():
    with_rescaling = tiny()
    without = copy_of(with_rescaling, include_rescaling=False)
    x = images(2)
    np.testing.assert_allclose(
        numpy(with_rescaling(x)), numpy(without(x.astype("float32") / 127.5 - 1.0)), atol=1e-5)


def test_other_sizes_are_resized_inside_the_model():
    model = tiny()
    big = images(2, size=24).astype("float32")
    resized = ops.image.resize(big, (16, 16), interpolation="bilinear", antialias=True)
    np.testing.assert_allclose(numpy(model(big)), numpy(model(numpy(resized))), atol=1e-4)


@pytest.mark.parametrize("shape", [(2, 16, 16), (2, 16, 16, 1), (2, 16, 16, 4)])
def test_call_rejects_wrong_rank_or_channels(shape):
    with pytest.raises(ValueError, match=str(shape).replace("(", r"\(").replace(")", r"\)")):
        tiny()(np.zeros(shape, "float32"))


@pytest.mark.parametrize("bad", [
    dict(image_size=18), dict(pooling="max"), dict(num_heads=0),
    dict(class_names=["a", "b"]), dict(image_size=(16, 16, 3)),
])
def test_constructor_rejects_bad_arguments(bad):
    with pytest.raises(ValueError):
        tiny(**bad)


# --- config, save and load ------------------------------------------------------------------


def test_config_round_trip():
    model = tiny(pooling="gap", dropout=0.1, class_names=list("abcde"), representation_size=8)
    config = model.get_config()
    assert VisionTransformer.from_config(config).get_config() == config


@pytest.mark.parametrize("pooling", ["cls", "gap"])
def test_keras_file_save_and_load_in_safe_mode(tmp_path, pooling):
    model = tiny(class_names=list("abcde"), representation_size=8, pooling=pooling)
    path = tmp_path / "vit.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded, VisionTransformer)
    assert loaded.class_names == list("abcde")
    x = images(2)
    np.testing.assert_allclose(numpy(loaded(x)), numpy(model(x)), atol=1e-6)


def test_dropout_is_active_only_in_training():
    model = tiny(dropout=0.5)
    x = images(2)
    np.testing.assert_allclose(numpy(model(x)), numpy(model(x)))
    assert not np.allclose(numpy(model(x, training=True)), numpy(model(x)))


# --- presets --------------------------------------------------------------------------------


@pytest.mark.parametrize("name, expected", [
    ("vit-ti16-224", 5_717_416),     # DeiT-Ti, 1000 classes
    ("vit-s16-224", 22_050_664),     # DeiT-S
    ("vit-b16-224", 86_567_656),     # ViT-B/16
    ("vit-l16-224", 304_326_632),    # ViT-L/16
])
def test_preset_parameter_counts_equal_the_published_ones(name, expected):
    # Variables created in a StatelessScope that does not initialise them on exit are
    # never allocated: counting ViT-L/16 costs no memory.
    with keras.StatelessScope(initialize_variables=False):
        model = VisionTransformer.from_architecture(name)
        count = model.count_params()
    # Keras keeps a global list of such variables, to allocate them later; drop ours.
    ours = {id(v) for v in model.variables}
    pending = global_state.get_global_attribute("uninitialized_variables", [])
    global_state.set_global_attribute(
        "uninitialized_variables", [v for v in pending if id(v) not in ours])
    assert count == expected


def test_from_architecture_applies_num_classes_and_overrides():
    model = VisionTransformer.from_architecture("vit-cifar-tiny", num_classes=3, num_layers=1,
                                          class_names=["cat", "dog", "bird"])
    assert (model.image_size, model.patch_size, model.hidden_dim) == (32, 4, 192)
    assert model.image_shape == (32, 32, 3)
    assert (model.num_classes, model.num_layers, model.class_names[0]) == (3, 1, "cat")
    assert tuple(model(images(1, size=32)).shape) == (1, 3)
    assert VisionTransformer.architectures() == sorted(architectures("VisionTransformer"))
    assert "vit-cifar-hybrid" in VisionTransformer.architectures()


def test_unknown_architecture_and_override_are_refused():
    with pytest.raises(ValueError, match="vit-huge") as error:
        VisionTransformer.from_architecture("vit-huge")
    assert all(name in str(error.value) for name in VisionTransformer.architectures())
    assert "transformer-tiny" not in str(error.value)  # another model's architecture
    with pytest.raises(ValueError, match="hidden_size"):
        VisionTransformer.from_architecture("vit-cifar-tiny", hidden_size=10)
    with pytest.raises(ValueError, match="transformer-tiny"):
        VisionTransformer.from_architecture("transformer-tiny")


def test_from_preset_means_trained_weights():
    model = VisionTransformer.from_preset("vit-cifar10")
    assert model.class_names[0] == "airplane"
    with pytest.raises(ValueError, match="'vit-cifar-tiny' is an architecture, not trained "
                                         r"weights: build .* VisionTransformer.from_architecture"):
        VisionTransformer.from_preset("vit-cifar-tiny")
    with pytest.raises(ValueError, match="is a Translator, not a VisionTransformer"):
        VisionTransformer.from_preset("translator-multi30k-en-de")


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
    np.testing.assert_allclose(numpy(changed(x)), numpy(model(x)), atol=0.1)
    # Dropout now acts in training (the old model, dropout 0, gives its inference output).
    np.testing.assert_array_equal(numpy(model(x, training=True)), numpy(model(x)))
    assert not np.allclose(numpy(changed(x, training=True)), numpy(changed(x)), atol=0.1)
    kept = model.with_training_options(attention_dropout=0.2)
    assert (kept.dropout, kept.attention_dropout) == (0.0, 0.2)
    assert kept.encoder_blocks[0].dtype_policy.name == model.encoder_blocks[0].dtype_policy.name
    with pytest.raises(ValueError, match="dropout must lie in \\[0, 1\\); got 1.5"):
        model.with_training_options(dropout=1.5)


# --- classify -------------------------------------------------------------------------------


def test_classify_returns_sorted_top_k_softmax_probabilities():
    model = tiny(class_names=list("abcde"))
    x = images(3)
    result = model.classify(x, top_k=3)
    probabilities = numpy(ops.softmax(model(x), axis=-1))
    assert len(result) == 3
    for row, expected in zip(result, probabilities):
        assert len(row) == 3
        best = np.argsort(-expected)[:3]
        assert [name for name, _ in row] == [list("abcde")[i] for i in best]
        np.testing.assert_allclose([p for _, p in row], expected[best], atol=1e-5)


def test_classify_single_image_default_names_and_large_top_k():
    model = tiny()
    result = model.classify(images(1)[0].astype("float32"), top_k=10)
    assert len(result) == 1 and len(result[0]) == 5
    assert sorted(name for name, _ in result[0]) == [f"class_{i}" for i in range(5)]
    assert sum(p for _, p in result[0]) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("bad, match", [
    (np.zeros((2, 16, 16, 1), "uint8"), r"\(2, 16, 16, 1\)"),
    (np.zeros((16, 16), "uint8"), r"\(16, 16\)"),
    (np.zeros((1, 2, 16, 16, 3), "uint8"), r"\(1, 2, 16, 16, 3\)"),
    (np.array([["a"]]), "numeric"),
    (np.zeros((0, 16, 16, 3), "uint8"), "empty"),
])
def test_classify_rejects_bad_images(bad, match):
    with pytest.raises(ValueError, match=match):
        tiny().classify(bad)


def test_classify_rejects_bad_top_k():
    with pytest.raises(ValueError, match="top_k"):
        tiny().classify(images(1), top_k=0)


def test_as_image_batch_adds_the_batch_axis():
    assert as_image_batch(np.zeros((8, 8, 3), "uint8")).shape == (1, 8, 8, 3)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_pixels_are_refused_naming_the_image(value):
    batch = np.zeros((4, 8, 8, 3), "float32")
    batch[2, 1, 1, 0] = value
    batch[3, 0, 0, 2] = value
    with pytest.raises(ValueError, match=r"image 2 of the batch holds NaN or infinite pixel "
                                         r"values \(2 such images\)"):
        tiny().classify(batch)


# --- attention maps and rollout -------------------------------------------------------------


def test_attention_maps_are_row_stochastic_per_block():
    maps = tiny().attention_maps(images(3))
    assert len(maps) == 2
    for weights in maps:
        assert weights.shape == (3, 4, 17, 17) and weights.dtype == np.float32
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("pooling, head_fusion, discard_ratio",
                         [("cls", "mean", 0.0), ("cls", "max", 0.5), ("gap", "min", 0.2)])
def test_rollout_is_a_distribution_over_the_patch_grid(pooling, head_fusion, discard_ratio):
    rollout = tiny(pooling=pooling).attention_rollout(
        images(2), discard_ratio=discard_ratio, head_fusion=head_fusion)
    assert rollout.shape == (2, 4, 4)
    assert np.all(rollout >= 0)
    np.testing.assert_allclose(rollout.sum(axis=(1, 2)), 1.0, atol=1e-5)


def test_rollout_is_uniform_when_attention_is_uniform():
    model = tiny()
    for block in model.encoder_blocks:  # q = k = 0: every logit equal, softmax uniform
        for dense in (block.self_attention.query_dense, block.self_attention.key_dense):
            dense.set_weights([np.zeros_like(w) for w in dense.get_weights()])
    np.testing.assert_allclose(model.attention_maps(images(1))[0], 1 / 17, atol=1e-6)
    np.testing.assert_allclose(model.attention_rollout(images(2)), 1 / 16, atol=1e-6)


def test_rollout_of_one_block_is_the_class_rows_attention_to_patches():
    # One layer: 0.5 W + 0.5 I differs from W/2 only on the diagonal, so the class token's
    # row over the patches is W[0, 1:] / 2, renormalised (Abnar & Zuidema, eq. for l = 1).
    model = tiny(num_layers=1)
    x = images(2)
    weights = model.attention_maps(x)[0].mean(axis=1)[:, 0, 1:]
    expected = weights / weights.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(model.attention_rollout(x).reshape(2, 16), expected, atol=1e-5)


def test_rollout_multiplies_later_layers_on_the_left():
    # Two hand-made 3-token layers: with a class token and 2 patches.
    first = np.array([[[[0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]]])
    second = np.array([[[[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]]])
    # A = 0.5 W + 0.5 I; R = A2 A1; class row of A2 = [.5, 0, .5]; R[0] = .5 A1[0] + .5 A1[2]
    # = .5 [.5, .5, 0] + .5 [0, 0, 1] = [.25, .25, .5] -> patches [.25, .5] / .75.
    rollout = attention_rollout([first, second])
    np.testing.assert_allclose(rollout, [[1 / 3, 2 / 3]], atol=1e-6)


@pytest.mark.parametrize("kwargs", [dict(head_fusion="median"), dict(discard_ratio=1.0),
                                    dict(discard_ratio=-0.1)])
def test_rollout_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        tiny().attention_rollout(images(1), **kwargs)


# --- head pruning ---------------------------------------------------------------------------


def zero_output_rows(model: VisionTransformer, heads: dict) -> VisionTransformer:
    """A copy of the unpruned model whose pruned heads contribute nothing."""
    reference = copy_of(model)
    for block, dropped in heads.items():
        dense = reference.encoder_blocks[block].self_attention.output_dense
        kernel, bias = dense.get_weights()  # kernel (heads, head_dim, hidden)
        kernel[dropped] = 0.0
        dense.set_weights([kernel, bias])
    return reference


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


# --- the hybrid ViT (convolutional stem) ----------------------------------------------------


def test_hybrid_keeps_the_token_grid_and_embeds_the_stem_map_one_by_one():
    model = tiny(stem_filters=[8, 12])
    plain = tiny()
    assert model.grid_size == plain.grid_size == (4, 4)
    assert model.patch_embedding.patch_size == 1
    x = images(2)
    # 1 x 1 patches of the stem's (batch, 4, 4, 12) map: a matrix product per position.
    features = numpy(model.stem(model._preprocess(x), training=False)).reshape(2, 16, 12)
    projection = model.patch_embedding.projection
    kernel = numpy(projection.kernel).reshape(12, 16)
    expected = features @ kernel + numpy(projection.bias)
    got = numpy(model.patch_embedding(model.stem(model._preprocess(x), training=False)))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert model(x).shape == (2, 5)


@pytest.mark.parametrize("style", ["strided", "pooled"])
def test_hybrid_config_save_and_load(tmp_path, style):
    model = tiny(stem_filters=[8], stem_style=style)
    config = model.get_config()
    assert config["stem_filters"] == [8] and config["stem_style"] == style
    assert model.stem.style == style
    assert VisionTransformer.from_config(config).get_config() == config
    path = tmp_path / "hybrid.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    x = images(2)
    np.testing.assert_allclose(numpy(loaded(x)), numpy(model(x)), atol=1e-6)


def test_cct_architecture_is_a_pooled_stem_under_a_class_token_encoder():
    model = VisionTransformer.from_architecture("vit-cifar-cct")
    assert model.stem.style == "pooled" and model.stem.filters == [64, 128]
    assert model.grid_size == (8, 8) and model.class_token is not None
    # CCT-4/3x2's tokenizer and encoder (Hassani et al.): 3*9*64 + 64*9*128 convolution
    # weights; 4 blocks of width 128, MLP 128; plus the 1 x 1 patch projection, the class and
    # position embeddings, the final norm and the head.
    block = 4 * (128 * 128 + 128) + 2 * (128 * 128) + 128 + 128 + 4 * 128
    expected = (3 * 9 * 64 + 64 * 9 * 128 + 128 * 128 + 128 + 128 + 65 * 128 + 4 * block
                + 2 * 128 + 128 * 10 + 10)
    assert model.count_params() == expected


def test_hybrid_stem_stride_must_divide_the_patch():
    with pytest.raises(ValueError, match="patch_size 4 is not a multiple of the stem's stride 8"):
        tiny(stem_filters=[4, 4, 4])


def test_hybrid_moves_to_a_larger_image_size_and_freezes_its_stem():
    from zoo.recipes.finetune import freeze_blocks

    model = tiny(stem_filters=[8, 8])
    larger = model.with_image_size(32)
    assert larger.grid_size == (8, 8)
    assert larger(images(1, size=32)).shape == (1, 5)
    freeze_blocks(model, 1)
    assert not model.stem.trainable and model.encoder_blocks[1].trainable


def test_hybrid_trains():
    model = tiny(stem_filters=[8, 8])
    x = images(8)
    first = fit_one_step(model, x, 5)
    for _ in range(5):
        last = fit_one_step(model, x, 5)
    assert last < first


def test_window_attention_reaches_the_blocks_and_the_config():
    model = tiny(attention_window=2, global_tokens=1, attention_block_size=8)
    assert all(b.attention_window == 2 and b.global_tokens == 1
               and b.attention_block_size == 8 for b in model.encoder_blocks)
    config = model.get_config()
    assert (config["attention_window"], config["global_tokens"],
            config["attention_block_size"]) == (2, 1, 8)
    dense = copy_of(model, attention_window=None, global_tokens=0, attention_block_size=None)
    x = images(2)
    # 17 tokens, each patch seeing 2 neighbours each side: not the dense model's output.
    assert not np.allclose(numpy(model(x)), numpy(dense(x)), atol=1e-4)


# --- DeiT's distillation token --------------------------------------------------------------


def test_distillation_token_lays_out_class_distillation_patches():
    model = tiny(distillation_token=True)
    assert model.num_prefix_tokens == 2 and model.distillation_head
    assert model.position_embedding.sequence_length == 2 + 16
    assert tuple(model.head.kernel.shape) == (2, 16, 5)
    assert tuple(model(images(3)).shape) == (3, 5)
    maps = model.attention_maps(images(1))
    assert maps[0].shape == (1, 4, 18, 18)
    class_only = tiny(distillation_token=True, distillation_head=False)
    assert class_only.num_prefix_tokens == 2 and not class_only.distillation_head
    assert tuple(class_only.head.kernel.shape) == (16, 5)


def test_distilled_logits_are_the_mean_of_the_two_heads():
    model = tiny(distillation_token=True)
    x = images(2)
    kernel, bias = (numpy(w) for w in model.head.weights)  # (2, 16, 5), (2, 5)
    # Without its distillation head, the model is the class-token-only model at half scale.
    class_only = VisionTransformer.from_config(
        {**model.get_config(), "distillation_head": False})

    def body(vit: VisionTransformer) -> list:
        return [w for w in vit.weights if w.path.split("/")[-2] != "head"]

    for old, new in zip(body(model), body(class_only), strict=True):
        new.assign(old)
    class_only.head.set_weights([kernel[0], bias[0]])
    model.head.set_weights([np.stack([kernel[0], 0 * kernel[1]]),
                            np.stack([bias[0], 0 * bias[1]])])
    np.testing.assert_allclose(numpy(model(x)), numpy(class_only(x)) / 2, atol=1e-5)
    # Swapping the two tokens (their vectors and position rows) and the two heads changes
    # nothing: each head reads its own token's output (attention is permutation-equivariant).
    model.head.set_weights([kernel, bias])
    swapped = copy_of(model)
    class_token = swapped.class_token.class_token
    distillation_token = swapped.distillation_token_layer.class_token
    class_token.assign(numpy(model.distillation_token_layer.class_token))
    distillation_token.assign(numpy(model.class_token.class_token))
    table = numpy(model.position_embedding.position_embeddings)
    swapped.position_embedding.position_embeddings.assign(table[[1, 0, *range(2, 18)]])
    swapped.head.set_weights([kernel[::-1], bias[::-1]])
    np.testing.assert_allclose(numpy(swapped(x)), numpy(model(x)), atol=1e-5)
    assert not np.allclose(numpy(model(x)), numpy(class_only(x)) / 2, atol=1e-3)


@pytest.mark.parametrize("bad, match", [
    (dict(distillation_token=True, pooling="gap"), "needs pooling='cls'"),
    (dict(distillation_head=True), "needs distillation_token=True"),
])
def test_distillation_arguments_that_contradict_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        tiny(**bad)


@pytest.mark.parametrize("head", [True, False])
def test_distilled_model_config_and_keras_file_round_trip(tmp_path, head):
    model = tiny(distillation_token=True, distillation_head=head, representation_size=8)
    config = model.get_config()
    assert (config["distillation_token"], config["distillation_head"]) == (True, head)
    assert VisionTransformer.from_config(config).get_config() == config
    model.save(tmp_path / "deit.keras")
    loaded = keras.saving.load_model(tmp_path / "deit.keras", safe_mode=True)
    x = images(2)
    np.testing.assert_allclose(numpy(loaded(x)), numpy(model(x)), atol=1e-6)


def test_configs_without_the_distillation_keys_build_the_plain_vit():
    """Models saved before the distillation token existed load as they were."""
    model = tiny()
    config = model.get_config()
    assert (config.pop("distillation_token"), config.pop("distillation_head")) == (False, False)
    old = VisionTransformer.from_config(config)
    assert old.num_prefix_tokens == 1 and old.get_config() == model.get_config()
    old.set_weights(model.get_weights())
    np.testing.assert_array_equal(numpy(old(images(2))), numpy(model(images(2))))


def test_distilled_model_surgery_keeps_both_leading_tokens():
    from zoo.recipes.finetune import replace_head

    model = tiny(image_size=32, patch_size=8, distillation_token=True)
    bigger = model.with_image_size(64)
    old = numpy(model.position_embedding.position_embeddings)
    new = numpy(bigger.position_embedding.position_embeddings)
    assert new.shape == (2 + 64, 16)
    np.testing.assert_array_equal(new[:2], old[:2])  # the class and distillation rows
    assert tuple(bigger(images(2, size=64)).shape) == (2, 5)
    x = images(2, size=32)
    rollout = model.attention_rollout(x)
    assert rollout.shape == (2, 4, 4)
    np.testing.assert_allclose(rollout.sum(axis=(1, 2)), 1.0, atol=1e-5)
    pruned = model.prune_heads({0: [1, 3]})
    reference = zero_output_rows(model, {0: [1, 3]})
    np.testing.assert_allclose(numpy(pruned(x)), numpy(reference(x)), atol=1e-5)
    new_head = replace_head(model, 3, ["a", "b", "c"])
    assert tuple(new_head.head.kernel.shape) == (2, 16, 3)
    np.testing.assert_array_equal(numpy(new_head.distillation_token_layer.class_token),
                                  numpy(model.distillation_token_layer.class_token))
    assert np.isfinite(fit_one_step(new_head, images(4, size=32), num_classes=3))


def test_distillation_token_is_frozen_with_the_embeddings():
    from zoo.recipes.finetune import freeze_blocks

    model = freeze_blocks(tiny(distillation_token=True), 1)
    assert not model.distillation_token_layer.trainable
    assert not model.class_token.trainable and model.encoder_blocks[1].trainable
    assert freeze_blocks(model, 0).distillation_token_layer.trainable
