"""Vision Transformer variants: the hybrid ViT (a convolutional stem embedded one position at
a time; CCT's pooled stem and its parameter count), windowed attention, and DeiT's
distillation token (class, distillation, patch layout; logits the mean of two heads; config,
`.keras` and old-config round trips; resizing, rollout, pruning, a new head and freezing keep
both leading tokens).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tests.zoo.models.conftest import (
    copy_of,
    fit_one_step,
    images,
    numpy,
    tiny,
    zero_output_rows,
)
from zoo.models.vit.model import VisionTransformer


# --- the hybrid ViT (convolutional stem) ----------------------------------------------------


def test_hybrid_keeps_the_token_grid_and_embeds_the_stem_map_one_by_one():
    model = tiny(stem_filters=[8, 12])
    plain = tiny()
    assert model.grid_size == plain.grid_size == (4, 4)
    assert model.patch_embedding.patch_size == 1
    x = images(2)
    # 1 x 1 patches of the stem's (batch, 4, 4, 12) map: a matrix product per position.
    features = numpy(model.stem(model.preprocessor(x), training=False)).reshape(2, 16, 12)
    projection = model.patch_embedding.projection
    kernel = numpy(projection.kernel).reshape(12, 16)
    expected = features @ kernel + numpy(projection.bias)
    got = numpy(model.patch_embedding(model.stem(model.preprocessor(x), training=False)))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert model(x).shape == (2, 5)


@pytest.mark.parametrize("style, filters", [("strided", [8]), ("pooled", [8]),
                                            ("vgg", [[6, 8]])])
def test_hybrid_config_save_and_load(tmp_path, style, filters):
    model = tiny(stem_filters=filters, stem_style=style)
    config = model.get_config()
    assert config["stem_filters"] == filters and config["stem_style"] == style
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


def test_vgg_architecture_is_a_batch_normalised_stem_to_a_4_by_4_grid():
    model = VisionTransformer.from_architecture("vit-cifar-vgg")
    assert model.stem.style == "vgg" and model.stem.filters == [64, [128, 128], 256]
    assert model.grid_size == (4, 4) and model.patch_embedding.patch_size == 1
    # Convolutions 3->64, 64->128, 128->128, 128->256 (3 x 3, no bias), each with batch norm
    # (4 weights a channel, 2 of them trainable); 4 blocks of width 256, MLP 512, with the
    # query/key norms absent; the 1 x 1 projection, class and 17 position embeddings, final
    # norm, head.
    convolutions = 9 * (3 * 64 + 64 * 128 + 128 * 128 + 128 * 256)
    batch_norms = 4 * (64 + 128 + 128 + 256)
    block = 4 * (256 * 256 + 256) + (256 * 512 + 512) + (512 * 256 + 256) + 4 * 256
    expected = (convolutions + batch_norms + 256 * 256 + 256 + 256 + 17 * 256 + 4 * block
                + 2 * 256 + 256 * 10 + 10)
    assert model.count_params() == expected


def test_hybrid_stem_stride_must_divide_the_patch():
    with pytest.raises(ValueError, match="patch_size 4 is not a multiple of the stem's stride 8"):
        tiny(stem_filters=[4, 4, 4])


def test_hybrid_moves_to_a_larger_image_size_and_freezes_its_stem():
    model = tiny(stem_filters=[8, 8])
    larger = model.with_image_size(32)
    assert larger.grid_size == (8, 8)
    assert larger(images(1, size=32)).shape == (1, 5)
    model.freeze_blocks(1)
    assert not model.stem.trainable and model.encoder_blocks[1].trainable


@pytest.mark.slow
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
    new_head = model.reset_classifier(3, ["a", "b", "c"])
    assert tuple(new_head.head.kernel.shape) == (2, 16, 3)
    np.testing.assert_array_equal(numpy(new_head.distillation_token_layer.class_token),
                                  numpy(model.distillation_token_layer.class_token))
    assert np.isfinite(fit_one_step(new_head, images(4, size=32), num_classes=3))


def test_distillation_token_is_frozen_with_the_embeddings():
    model = tiny(distillation_token=True).freeze_blocks(1)
    assert not model.distillation_token_layer.trainable
    assert not model.class_token.trainable and model.encoder_blocks[1].trainable
    assert model.unfreeze().distillation_token_layer.trainable
