"""Encoder and decoder blocks: the harness, keras-hub's blocks as reference, cached decoding."""

import keras
import keras_hub
import numpy as np
import pytest

from zoo.layers.transformer_decoder import TransformerDecoderBlock
from zoo.layers.transformer_encoder import TransformerEncoderBlock
from tests.layers.harness import run_layer_test

RNG = np.random.default_rng(0)
TARGET = RNG.normal(size=(2, 6, 16)).astype("float32")
SOURCE = RNG.normal(size=(2, 4, 16)).astype("float32")
SOURCE_MASK = np.array([[True, True, True, False], [True, True, True, True]])

# keras-hub's names for the same weights.
_HUB_NAMES = [
    ("self_attention_layer_norm", "self_attention_norm"),
    ("cross_attention_layer_norm", "cross_attention_norm"),
    ("self_attention_layer", "self_attention"),
    ("feedforward_intermediate_dense", "feed_forward/intermediate"),
    ("feedforward_output_dense", "feed_forward/output"),
    ("feedforward_layer_norm", "feed_forward_norm"),
]


def _copy_from_hub(hub_layer, ours):
    values = {}
    for variable in hub_layer.weights:
        path = variable.path.split("/", 1)[1]
        for hub_name, our_name in _HUB_NAMES:
            path = path.replace(hub_name, our_name)
        values[path] = np.array(variable)
    for variable in ours.weights:
        variable.assign(values.pop(variable.path.split("/", 1)[1]))
    assert not values, f"keras-hub weights left unmatched: {sorted(values)}"


@pytest.mark.parametrize("normalize_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_harness(normalize_first, activation):
    run_layer_test(
        TransformerEncoderBlock,
        {"num_heads": 4, "intermediate_dim": 32, "normalize_first": normalize_first,
         "activation": activation, "dropout": 0.1, "attention_dropout": 0.1},
        TARGET, expected_output_shape=TARGET.shape,
    )


def test_decoder_harness():
    run_layer_test(
        TransformerDecoderBlock,
        {"num_heads": 4, "intermediate_dim": 32, "dropout": 0.1},
        [TARGET, SOURCE], expected_output_shape=TARGET.shape,
    )


@pytest.mark.parametrize("normalize_first", [False, True])
def test_encoder_equals_keras_hub(normalize_first):
    hub = keras_hub.layers.TransformerEncoder(32, 4, normalize_first=normalize_first)
    ours = TransformerEncoderBlock(4, 32, normalize_first=normalize_first)
    hub(TARGET)
    ours(TARGET)
    _copy_from_hub(hub, ours)
    mask = np.array([[1, 1, 1, 1, 0, 0], [1] * 6], bool)
    # Outputs at padded positions carry no meaning (keras-hub masks keys only, we also mask
    # padded queries as keras.layers.MultiHeadAttention does): compare real tokens.
    got = np.array(ours(TARGET, padding_mask=mask))
    expected = np.array(hub(TARGET, padding_mask=mask))
    np.testing.assert_allclose(got[mask], expected[mask], atol=1e-5)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_decoder_equals_keras_hub(normalize_first):
    hub = keras_hub.layers.TransformerDecoder(32, 4, normalize_first=normalize_first)
    ours = TransformerDecoderBlock(4, 32, normalize_first=normalize_first)
    hub(TARGET, SOURCE)
    ours(TARGET, SOURCE)
    _copy_from_hub(hub, ours)
    expected = hub(TARGET, SOURCE, encoder_padding_mask=SOURCE_MASK)
    got = ours(TARGET, SOURCE, encoder_padding_mask=SOURCE_MASK)
    np.testing.assert_allclose(np.array(got), np.array(expected), atol=1e-5)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_decoder_one_step_at_a_time_equals_full_pass(normalize_first):
    block = TransformerDecoderBlock(4, 32, normalize_first=normalize_first)
    full = np.array(block(TARGET, SOURCE, encoder_padding_mask=SOURCE_MASK))
    self_cache = block.empty_self_attention_cache(2, TARGET.shape[1])
    cross_cache = block.compute_cross_attention_cache(SOURCE)
    steps = []
    for i in range(TARGET.shape[1]):
        out, self_cache, cross_cache = block(
            TARGET[:, i:i + 1], encoder_padding_mask=SOURCE_MASK,
            self_attention_cache=self_cache, self_attention_cache_update_index=i,
            cross_attention_cache=cross_cache)
        steps.append(np.array(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


def test_decoder_is_causal():
    block = TransformerDecoderBlock(4, 32)
    changed = TARGET.copy()
    changed[:, 3:] += 1.0
    a, b = np.array(block(TARGET, SOURCE)), np.array(block(changed, SOURCE))
    np.testing.assert_allclose(a[:, :3], b[:, :3], atol=1e-6)
    assert np.abs(a[:, 3:] - b[:, 3:]).max() > 1e-3


def test_attention_scores_returned_cross_attention_included():
    block = TransformerDecoderBlock(4, 32)
    out, scores = block(TARGET, SOURCE, encoder_padding_mask=SOURCE_MASK,
                        return_attention_scores=True)
    assert tuple(scores["self_attention"].shape) == (2, 4, 6, 6)
    cross = np.array(scores["cross_attention"])
    assert cross.shape == (2, 4, 6, 4)
    assert np.all(cross[0, :, :, 3] == 0.0)  # the padded source token
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-5)
    # Scores requested or not, the output is the same.
    np.testing.assert_allclose(
        np.array(out), np.array(block(TARGET, SOURCE, encoder_padding_mask=SOURCE_MASK)),
        atol=1e-5)
    encoder = TransformerEncoderBlock(4, 32)
    _, enc_scores = encoder(TARGET, return_attention_scores=True)
    assert tuple(enc_scores.shape) == (2, 4, 6, 6)


def test_decoder_only_block_without_encoder():
    block = TransformerDecoderBlock(2, 16)
    out = block(TARGET)
    assert tuple(out.shape) == TARGET.shape
    with pytest.raises(ValueError, match="without an encoder"):
        block(TARGET, SOURCE)


def test_residual_dropout_only_in_training():
    block = TransformerEncoderBlock(4, 32, dropout=0.5)
    inference = np.array(block(TARGET))
    np.testing.assert_allclose(np.array(block(TARGET, training=False)), inference)
    assert np.abs(np.array(block(TARGET, training=True)) - inference).max() > 1e-3


def test_bad_sizes_name_the_values():
    with pytest.raises(ValueError, match="16 is not divisible by num_heads=3"):
        TransformerEncoderBlock(3, 32)(TARGET)
    block = TransformerDecoderBlock(4, 32)
    with pytest.raises(ValueError, match="feature size 8 .* 16"):
        block(TARGET, np.zeros((2, 4, 8), "float32"))


def test_keras_masking_reaches_the_encoder():
    ids = np.array([[5, 6, 7, 0], [1, 2, 3, 4]])
    embedding = keras.layers.Embedding(10, 16, mask_zero=True)
    block = TransformerEncoderBlock(4, 32)
    inputs = keras.Input((4,), dtype="int32")
    model = keras.Model(inputs, block(embedding(inputs)))
    x = np.array(embedding(ids))
    np.testing.assert_allclose(
        np.array(model(ids)), np.array(block(x, padding_mask=ids != 0)), atol=1e-6)


def test_contradicting_cache_arguments_are_refused():
    block = TransformerDecoderBlock(4, 32)
    block(TARGET, SOURCE)
    with pytest.raises(ValueError, match="index 0 without one"):
        block(TARGET[:, :1], SOURCE, self_attention_cache_update_index=0)
    with pytest.raises(ValueError, match="needs self_attention_cache_update_index"):
        block(TARGET[:, :1], SOURCE, self_attention_cache=block.empty_self_attention_cache(2, 6))


def test_the_shared_base_is_neither_exported_nor_serializable():
    from zoo import layers
    from zoo.layers.transformer_encoder import TransformerBlock

    assert "TransformerBlock" not in layers.__all__ and not hasattr(layers, "TransformerBlock")
    assert keras.saving.get_registered_name(TransformerBlock) == "TransformerBlock"
    for block in (TransformerEncoderBlock, TransformerDecoderBlock):
        assert keras.saving.get_registered_name(block) == f"zoo>{block.__name__}"
