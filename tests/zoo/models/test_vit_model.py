"""The Vision Transformer as built: its architecture (logits, rescaling, resizing inside the
model, keras-hub's ViTBackbone given the same weights), argument checks, config and `.keras`
round trips, dropout, the named architectures and presets (parameter counts equal the
published ones), and its inference helpers: `classify` (sorted top-k probabilities, bad images
refused) and attention maps and rollout (Abnar & Zuidema).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops
from keras.src.backend.common import global_state

from tests.zoo.models.conftest import copy_of, images, numpy, tiny
from zoo.models.architectures import architectures
from zoo.models.vit.attention_rollout import attention_rollout
from zoo.models.vit.image_batch import as_image_batch
from zoo.models.vit.model import VisionTransformer


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
