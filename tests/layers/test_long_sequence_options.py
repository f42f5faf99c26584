"""MultiHeadAttention and the Transformer blocks with attention_window / global_tokens /
attention_block_size: equal to the dense layer given the equivalent mask, caches included."""

import keras
import numpy as np
import pytest

from zoo.layers.multi_head_attention import MultiHeadAttention
from zoo.layers.transformer_decoder import TransformerDecoderBlock
from zoo.layers.transformer_encoder import TransformerEncoderBlock
from tests.layers.harness import run_layer_test

RNG = np.random.default_rng(0)
LENGTH = 19  # not a multiple of the blocks below
X = RNG.normal(size=(2, LENGTH, 16)).astype("float32")
MEMORY = RNG.normal(size=(2, 11, 16)).astype("float32")
PADDING = np.ones((2, LENGTH), bool)
PADDING[0, -4:] = False
WINDOW, GLOBAL, BLOCK = 3, 2, 5


def _band(length, window, causal=False, global_tokens=0):
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    allowed = (np.abs(i - j) <= window) | (i < global_tokens) | (j < global_tokens)
    return allowed & (j <= i) if causal else allowed


def _pair(cls, options, *inputs, **kwargs):
    """A layer with `options` and a plain one with the same weights."""
    ours, dense = cls(**kwargs, **options), cls(**kwargs)
    ours(*inputs)
    dense(*inputs)
    dense.set_weights(ours.get_weights())
    return ours, dense


OPTIONS = [
    ({"attention_window": WINDOW}, False),
    ({"attention_window": WINDOW, "global_tokens": GLOBAL, "attention_block_size": 4}, False),
    ({"attention_window": WINDOW, "global_tokens": GLOBAL}, True),
    ({"attention_block_size": BLOCK}, False),
    ({"attention_block_size": BLOCK}, True),
]


def _equivalent_mask(options, causal):
    if "attention_window" not in options:
        return np.ones((LENGTH, LENGTH), bool)
    return _band(LENGTH, options["attention_window"], causal, options.get("global_tokens", 0))


@pytest.mark.parametrize("options, causal", OPTIONS)
def test_multi_head_attention_equals_dense_with_equivalent_mask(options, causal):
    ours, dense = _pair(MultiHeadAttention, options, X, num_heads=4, key_dim=4)
    band = np.broadcast_to(_equivalent_mask(options, causal), (2, LENGTH, LENGTH))
    for padding in (None, PADDING):
        kwargs = {"use_causal_mask": causal}
        if padding is not None:
            kwargs.update(query_mask=padding, value_mask=padding)
        expected = np.array(dense(X, X, attention_mask=band, **kwargs))
        np.testing.assert_allclose(np.array(ours(X, X, **kwargs)), expected, atol=1e-5)
        # Weights requested: the dense path with the band, same outputs.
        out, scores = ours(X, X, return_attention_scores=True, **kwargs)
        np.testing.assert_allclose(np.array(out), expected, atol=1e-5)
        if "attention_window" in options and padding is None:  # padded rows are uniform
            assert np.all(np.array(scores)[:, :, ~band[0]] == 0.0)


def test_chunked_cross_attention_with_padding_equals_dense():
    ours, dense = _pair(MultiHeadAttention, {"attention_block_size": 4}, X, MEMORY,
                        num_heads=2, key_dim=8)
    memory_mask = np.ones((2, 11), bool)
    memory_mask[1, 7:] = False
    expected = dense(X, MEMORY, value_mask=memory_mask)
    np.testing.assert_allclose(np.array(ours(X, MEMORY, value_mask=memory_mask)),
                               np.array(expected), atol=1e-5)


def test_multi_head_attention_config_round_trip_and_harness():
    options = {"num_heads": 2, "key_dim": 4, "attention_window": 2, "global_tokens": 1,
               "attention_block_size": 4}
    layer = MultiHeadAttention(**options)
    config = layer.get_config()
    assert {k: config[k] for k in options} == options
    assert MultiHeadAttention.from_config(config).get_config() == config
    run_layer_test(MultiHeadAttention, options, X[:, :9], expected_output_shape=(2, 9, 16),
                   bfloat16_atol=0.1)


def test_defaults_are_unset():
    config = MultiHeadAttention(num_heads=2, key_dim=4).get_config()
    assert (config["attention_window"], config["global_tokens"],
            config["attention_block_size"]) == (None, 0, None)


def test_bad_options_name_the_value():
    with pytest.raises(ValueError, match="attention_window.*got -1"):
        MultiHeadAttention(num_heads=2, key_dim=4, attention_window=-1)
    with pytest.raises(ValueError, match="attention_block_size.*got 0"):
        MultiHeadAttention(num_heads=2, key_dim=4, attention_block_size=0)
    with pytest.raises(ValueError, match="global_tokens needs attention_window; got"):
        MultiHeadAttention(num_heads=2, key_dim=4, global_tokens=1)
    with pytest.raises(ValueError, match="global_tokens.*got 'x'"):
        TransformerEncoderBlock(2, 8, attention_window=2, global_tokens="x")
    layer = MultiHeadAttention(num_heads=2, key_dim=4, attention_window=2)
    with pytest.raises(ValueError, match="got 19 queries and 11 keys"):
        layer(X, MEMORY)


# --- blocks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("options", [o for o, causal in OPTIONS if not causal])
def test_encoder_block_equals_dense_with_equivalent_mask(options):
    ours, dense = _pair(TransformerEncoderBlock, options, X, num_heads=4,
                        intermediate_dim=32, normalize_first=True)
    band = np.broadcast_to(_equivalent_mask(options, False), (2, LENGTH, LENGTH))
    expected = dense(X, padding_mask=PADDING, attention_mask=band)
    np.testing.assert_allclose(np.array(ours(X, padding_mask=PADDING)), np.array(expected),
                               atol=1e-5)
    config = ours.get_config()
    rebuilt = TransformerEncoderBlock.from_config(config)
    assert rebuilt.get_config() == config
    assert rebuilt.attention_window == options.get("attention_window")


def test_decoder_block_window_equals_dense_and_cached_decoding():
    options = {"attention_window": WINDOW, "global_tokens": 1, "attention_block_size": 4}
    ours, dense = _pair(TransformerDecoderBlock, options, X, MEMORY, num_heads=4,
                        intermediate_dim=32)
    assert ours.cross_attention.attention_window is None
    # The dense block with the band as an extra mask on its causal self-attention.
    band = _band(LENGTH, WINDOW, causal=True, global_tokens=1)
    dense.self_attention._combined_mask = _with_extra_mask(dense.self_attention, band)
    full = np.array(ours(X, MEMORY))
    np.testing.assert_allclose(full, np.array(dense(X, MEMORY)), atol=1e-5)
    # One token at a time with the caches: the same outputs as the full pass.
    self_cache = ours.empty_self_attention_cache(2, LENGTH)
    cross_cache = ours.compute_cross_attention_cache(MEMORY)
    steps = []
    for i in range(LENGTH):
        out, self_cache, cross_cache = ours(
            X[:, i:i + 1], self_attention_cache=self_cache,
            self_attention_cache_update_index=i, cross_attention_cache=cross_cache)
        steps.append(np.array(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)
    config = ours.get_config()
    assert TransformerDecoderBlock.from_config(config).get_config() == config


def test_decoder_block_chunked_equals_dense():
    ours, dense = _pair(TransformerDecoderBlock, {"attention_block_size": 4}, X, MEMORY,
                        num_heads=4, intermediate_dim=32)
    assert ours.cross_attention.attention_block_size == 4
    memory_mask = np.ones((2, 11), bool)
    memory_mask[0, 6:] = False
    expected = dense(X, MEMORY, decoder_padding_mask=PADDING, encoder_padding_mask=memory_mask)
    got = ours(X, MEMORY, decoder_padding_mask=PADDING, encoder_padding_mask=memory_mask)
    np.testing.assert_allclose(np.array(got), np.array(expected), atol=1e-5)


def _with_extra_mask(layer, extra):
    """`layer._combined_mask` that also ANDs `extra` (for a dense reference block)."""
    original = layer._combined_mask

    def combined(*args, **kwargs):
        mask = original(*args, **kwargs)
        extra_mask = keras.ops.convert_to_tensor(extra)
        return extra_mask if mask is None else keras.ops.logical_and(mask, extra_mask)

    return combined
