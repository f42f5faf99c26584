"""chunked_attention and sliding_window_attention against the dense equation.

Every reference is `scaled_dot_product_attention` with a mask built here in numpy (or numpy
itself), never by the code under test.
"""

import keras
import numpy as np
import pytest
from keras import ops

from zoo.layers.attention import scaled_dot_product_attention
from zoo.layers.chunked_attention import (
    chunked_attention,
    sliding_window_attention,
    sliding_window_mask,
)

RNG = np.random.default_rng(0)
BLOCK = 8
HEAD_DIM = 8


def _qkv(query_length, key_length=None, batch=2, heads=3, value_dim=HEAD_DIM, seed=0):
    rng = np.random.default_rng(seed)
    key_length = query_length if key_length is None else key_length
    q = rng.normal(size=(batch, heads, query_length, HEAD_DIM)).astype("float32")
    k = rng.normal(size=(batch, heads, key_length, HEAD_DIM)).astype("float32")
    v = rng.normal(size=(batch, heads, key_length, value_dim)).astype("float32")
    return q, k, v


def _band(length, window, causal=False, global_tokens=0):
    """The Longformer pattern, written out: |i - j| <= w, or i or j global; j <= i if causal."""
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    allowed = (np.abs(i - j) <= window) | (i < global_tokens) | (j < global_tokens)
    return allowed & (j <= i) if causal else allowed


def _padding(key_length, batch=2):
    """(batch, 1, 1, S): the first sequence ends 5 keys early, the second is whole."""
    mask = np.ones((batch, 1, 1, key_length), bool)
    mask[0, ..., -5:] = False
    return mask


def _dense(q, k, v, mask):
    return np.asarray(scaled_dot_product_attention(q, k, v, mask=mask)[0])


def _numpy(x):
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")))


# --- chunked attention ----------------------------------------------------------------------


@pytest.mark.parametrize("length", [16, 21])  # a multiple of the block size, and not
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padding", [False, True])
def test_chunked_equals_dense(length, causal, padding):
    q, k, v = _qkv(length, value_dim=5)
    mask = np.ones((length, length), bool)
    if causal:
        mask = np.tril(mask)
    pad = _padding(length) if padding else None
    reference = _dense(q, k, v, mask if pad is None else mask & pad)
    got = chunked_attention(q, k, v, mask=pad, causal=causal, block_size=BLOCK)
    np.testing.assert_allclose(_numpy(got), reference, atol=1e-5)


def test_chunked_cross_attention_and_a_block_longer_than_the_keys():
    q, k, v = _qkv(5, 21)
    pad = _padding(21)
    reference = _dense(q, k, v, pad)
    for block_size in (4, 7, 64):
        got = chunked_attention(q, k, v, mask=pad, block_size=block_size)
        np.testing.assert_allclose(_numpy(got), reference, atol=1e-5)


def test_chunked_row_with_every_key_masked_is_uniform_as_in_dense():
    q, k, v = _qkv(10, 19)
    mask = RNG.random((2, 3, 10, 19)) > 0.5
    mask[0, 1, 4] = False  # a row with no key at all
    reference = _dense(q, k, v, mask)
    np.testing.assert_allclose(reference[0, 1, 4], v[0, 1].mean(0), atol=1e-5)
    got = chunked_attention(q, k, v, mask=mask, block_size=4)
    np.testing.assert_allclose(_numpy(got), reference, atol=1e-5)


# --- sliding-window attention ---------------------------------------------------------------


@pytest.mark.parametrize("length", [16, 21])
@pytest.mark.parametrize("window, global_tokens", [(0, 0), (3, 0), (3, 2), (30, 1)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padding", [False, True])
def test_window_equals_dense_with_band_mask(length, window, global_tokens, causal, padding):
    q, k, v = _qkv(length, value_dim=5)
    band = _band(length, window, causal, global_tokens)
    pad = _padding(length) if padding else None
    reference = _dense(q, k, v, band if pad is None else band & pad)
    got = sliding_window_attention(q, k, v, window, causal=causal,
                                   global_tokens=global_tokens, mask=pad, block_size=BLOCK)
    np.testing.assert_allclose(_numpy(got), reference, atol=1e-5)


def test_window_with_a_full_mask_and_rows_with_no_key():
    q, k, v = _qkv(21)
    mask = RNG.random((2, 3, 21, 21)) > 0.4
    mask[1, 0, 15] = False  # a local row with no key
    mask[0, 2, 1] = False  # a global row with no key
    band = _band(21, 4, global_tokens=2)
    got = sliding_window_attention(q, k, v, 4, global_tokens=2, mask=mask, block_size=5)
    np.testing.assert_allclose(_numpy(got), _dense(q, k, v, band & mask), atol=1e-5)


def test_window_against_numpy_loops():
    # An independent reference: per-query softmax over its visible keys, in float64.
    q, k, v = _qkv(13, batch=1, heads=1)
    q, k, v = q[0, 0], k[0, 0], v[0, 0]
    window, global_tokens = 2, 1
    expected = np.zeros_like(v, dtype="float64")
    for i in range(13):
        keys = [j for j in range(13)
                if abs(i - j) <= window or i < global_tokens or j < global_tokens]
        logits = q[i].astype("float64") @ k[keys].T.astype("float64") / np.sqrt(HEAD_DIM)
        weights = np.exp(logits - logits.max())
        expected[i] = weights / weights.sum() @ v[keys]
    got = sliding_window_attention(q, k, v, window, global_tokens=global_tokens, block_size=4)
    np.testing.assert_allclose(_numpy(got), expected, atol=1e-5)


def test_sliding_window_mask_is_the_band():
    for causal in (False, True):
        got = sliding_window_mask(9, window=2, causal=causal, global_tokens=1)
        np.testing.assert_array_equal(_numpy(got).astype(bool), _band(9, 2, causal, 1))
    # Queries 6..8 of a longer sequence (cached decoding).
    got = sliding_window_mask(3, 12, window=2, causal=True, global_tokens=1, offset=6)
    np.testing.assert_array_equal(_numpy(got).astype(bool), _band(12, 2, True, 1)[6:9])


# --- gradients ------------------------------------------------------------------------------


def _gradients(fn, q, k, v):
    """d sum(fn(q, k, v) * w) / d(q, k, v) on the current backend."""
    w = np.random.default_rng(1).normal(size=fn(q, k, v).shape).astype("float32")
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.jit(jax.grad(lambda *a: (fn(*a) * w).sum(), argnums=(0, 1, 2)))(q, k, v)
    if backend == "tensorflow":
        import tensorflow as tf

        tensors = [tf.constant(a) for a in (q, k, v)]
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            loss = tf.reduce_sum(fn(*tensors) * w)
        return tape.gradient(loss, tensors)
    pytest.skip(f"no gradient helper for the {backend} backend")


@pytest.mark.parametrize("method", ["chunked", "window"])
def test_gradients_equal_dense(method):
    length = 19
    q, k, v = _qkv(length)
    pad = _padding(length)
    if method == "chunked":
        mask = np.tril(np.ones((length, length), bool)) & pad
        fn = lambda q, k, v: chunked_attention(q, k, v, mask=pad, causal=True,  # noqa: E731
                                               block_size=BLOCK)
    else:
        mask = _band(length, 3, global_tokens=2) & pad
        fn = lambda q, k, v: sliding_window_attention(  # noqa: E731
            q, k, v, 3, global_tokens=2, mask=pad, block_size=BLOCK)
    expected = _gradients(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=mask)[0], q, k, v)
    for got, want in zip(_gradients(fn, q, k, v), expected):
        np.testing.assert_allclose(_numpy(got), _numpy(want), atol=1e-5)


# --- low precision --------------------------------------------------------------------------


# Measured largest differences from float32 dense on the same rounded inputs (T 45, d 16):
# bfloat16 0.0039 (the dense function in bfloat16: 0.0064), float16 0.00049 (0.00096), i.e.
# one rounding of the output; the tolerances leave twice that.
@pytest.mark.parametrize("dtype, atol", [("bfloat16", 8e-3), ("float16", 1e-3)])
@pytest.mark.parametrize("method", ["chunked", "window"])
def test_low_precision_inputs(dtype, atol, method):
    q, k, v = _qkv(45)
    low = [ops.cast(x, dtype) for x in (q, k, v)]
    rounded = [_numpy(x) for x in low]
    if method == "chunked":
        got = chunked_attention(*low, causal=True, block_size=BLOCK)
        mask = np.tril(np.ones((45, 45), bool))
    else:
        got = sliding_window_attention(*low, 5, global_tokens=2, block_size=BLOCK)
        mask = _band(45, 5, global_tokens=2)
    assert keras.backend.standardize_dtype(got.dtype) == dtype
    np.testing.assert_allclose(_numpy(got), _dense(*rounded, mask), atol=atol)


# --- bad arguments --------------------------------------------------------------------------


def test_bad_arguments_name_the_value():
    q, k, v = _qkv(6)
    with pytest.raises(ValueError, match="block_size.*got 0"):
        chunked_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match="window.*got -1"):
        sliding_window_attention(q, k, v, -1)
    with pytest.raises(ValueError, match="global_tokens.*got 1.5"):
        sliding_window_attention(q, k, v, 2, global_tokens=1.5)
    q2, k2, v2 = _qkv(6, 9)
    with pytest.raises(ValueError, match="got 6 and 9"):
        sliding_window_attention(q2, k2, v2, 2)
    with pytest.raises(ValueError, match="does not broadcast"):
        chunked_attention(q, k, v, mask=np.ones((6, 5), bool))


# --- memory under XLA -----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["chunked", "window"])
def test_xla_keeps_only_a_few_blocks_of_scores(method):
    # XLA's own buffer plan (JAX): the compiled function's temporaries stay far below one
    # (heads, T, T) score array, so blocks are not all alive at once.
    if keras.backend.backend() != "jax":
        pytest.skip("reads the XLA buffer plan through JAX")
    import jax

    length, heads = 1024, 2
    x = np.zeros((1, heads, length, 16), "float32")
    if method == "chunked":
        fn = lambda q, k, v: chunked_attention(q, k, v, block_size=64)  # noqa: E731
    else:
        fn = lambda q, k, v: sliding_window_attention(q, k, v, 32)  # noqa: E731
    analysis = jax.jit(fn).lower(x, x, x).compile().memory_analysis()
    if analysis is None:
        pytest.skip("this JAX gives no memory analysis")
    scores_bytes = heads * length * length * 4
    assert analysis.temp_size_in_bytes < scores_bytes / 3, analysis.temp_size_in_bytes
