"""scaled_dot_product_attention against worked examples computed by hand."""

import numpy as np
import pytest

from zoo.layers.attention import causal_mask, fused_attention, scaled_dot_product_attention

# A worked example: two tokens of three features, projected to d_k = d_v = 2.
X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
W_Q = np.array([[0.01, 0.03], [0.02, 0.02], [0.03, 0.01]])
W_K = np.array([[0.05, 0.05], [0.06, 0.05], [0.07, 0.05]])
W_V = np.array([[0.02, 0.02], [0.01, 0.02], [0.01, 0.01]])


def test_worked_example():
    q, k, v = X @ W_Q, X @ W_K, X @ W_V
    np.testing.assert_allclose(q, [[0.14, 0.10], [0.32, 0.28]], atol=1e-6)
    context, weights = scaled_dot_product_attention(q, k, v)
    # The softmax (top-left 0.4787 = 1 / (1 + e^(0.1441 - 0.0588)), logits q k^T / sqrt 2)
    # and the context vectors.
    np.testing.assert_allclose(np.array(weights)[0], [0.4787, 0.5213], atol=2e-4)
    np.testing.assert_allclose(np.array(weights)[1], [0.4474, 0.5526], atol=2e-4)
    np.testing.assert_allclose(
        np.array(context), [[0.1326, 0.1682], [0.1363, 0.1729]], atol=2e-4)


def test_causal_rows():
    # A causal row has zero weight after the diagonal, and rows sum to one.
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(3, 4)) for _ in range(3))
    _, weights = scaled_dot_product_attention(q, k, v, mask=np.array(causal_mask(3)))
    weights = np.array(weights)
    assert weights[0, 0] == pytest.approx(1.0)
    assert np.all(weights[np.triu_indices(3, 1)] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    # The first context row of a causal pass is V's first row.
    values = np.array([[0.1, 0.2, 0.3, 0.3], [0.4, 0.24, 0.9, 0.3], [0.1, 0.8, 0.3, 0.3]])
    context, _ = scaled_dot_product_attention(q, k, values, mask=np.array(causal_mask(3)))
    np.testing.assert_allclose(np.array(context)[0], values[0], atol=1e-6)


def test_weights_times_values():
    # Softmax rows [[1,0,0],[.6,.4,0],[.2,.5,.3]] times V gives C_00 = 0.1.
    w = np.array([[1.0, 0, 0], [0.6, 0.4, 0], [0.2, 0.5, 0.3]])
    values = np.array([[0.1, 0.2, 0.3, 0.3], [0.4, 0.24, 0.9, 0.3], [0.1, 0.8, 0.3, 0.3]])
    logits = np.log(np.where(w > 0, w, 1e-30))
    # Logits whose softmax is w: queries/keys built so that q k^T * scale = logits.
    q, k = logits * np.sqrt(3.0), np.eye(3)
    context, weights = scaled_dot_product_attention(q, k, values, mask=w > 0)
    np.testing.assert_allclose(np.array(weights), w, atol=1e-6)
    assert float(np.array(context)[0, 0]) == pytest.approx(0.1)
    np.testing.assert_allclose(np.array(context), w @ values, atol=1e-6)


def test_fused_equals_explicit_with_mask():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(2, 5, 3, 8)).astype("float32")
    k = rng.normal(size=(2, 7, 3, 8)).astype("float32")
    v = rng.normal(size=(2, 7, 3, 8)).astype("float32")
    mask = rng.random((2, 1, 5, 7)) > 0.3
    mask[..., 0] = True
    fused = np.array(fused_attention(q, k, v, mask=mask))
    explicit, _ = scaled_dot_product_attention(
        q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), mask=mask)
    np.testing.assert_allclose(fused, np.array(explicit).transpose(0, 2, 1, 3), atol=1e-5)


def test_fused_hands_the_backend_a_padding_mask_with_every_query(monkeypatch):
    # cuDNN's fused attention refuses a mask that broadcasts over the queries (a padding
    # mask (batch, 1, 1, S)); the backend gets it whole, with the same answer.
    import keras

    rng = np.random.default_rng(1)
    q = rng.normal(size=(2, 5, 3, 8)).astype("float32")
    k = rng.normal(size=(2, 7, 3, 8)).astype("float32")
    v = rng.normal(size=(2, 7, 3, 8)).astype("float32")
    padding = np.ones((2, 1, 1, 7), bool)
    padding[1, ..., 4:] = False
    given = []
    real = keras.ops.dot_product_attention

    def spy(*args, mask=None, **kwargs):
        given.append(tuple(mask.shape))
        return real(*args, mask=mask, **kwargs)

    monkeypatch.setattr(keras.ops, "dot_product_attention", spy)
    fused = np.array(fused_attention(q, k, v, mask=padding))
    one_query = np.array(fused_attention(q[:, :1], k, v, mask=padding))
    assert given == [(2, 1, 5, 7), (2, 1, 1, 7)]
    explicit, _ = scaled_dot_product_attention(
        q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3),
        mask=padding)
    np.testing.assert_allclose(fused, np.array(explicit).transpose(0, 2, 1, 3), atol=1e-5)
    np.testing.assert_allclose(one_query, fused[:, :1], atol=1e-5)


def test_causal_mask_offset():
    mask = np.array(causal_mask(2, 5, offset=2))
    np.testing.assert_array_equal(mask, [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]])


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((2, 4), (3, 5), (3, 5)), "same last dimension"),
        (((2, 4), (3, 4), (2, 4)), "same length"),
        (((1, 2, 4), (3, 4), (3, 4)), "same rank"),
    ],
)
def test_bad_shapes_name_the_values(shapes, message):
    arrays = [np.zeros(s, "float32") for s in shapes]
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(*arrays)


def test_mask_that_does_not_broadcast():
    x = np.zeros((3, 4), "float32")
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        scaled_dot_product_attention(x, x, x, mask=np.ones((2, 2), bool))


def test_one_key_gets_weight_one_without_a_warning():
    # Every query attends to the only key (masked or not, a lone key's row is uniform), and
    # Keras's "softmax over an axis of size 1" warning must not reach a user's first call.
    import warnings

    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 1, 4)), rng.normal(size=(2, 1, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        context, weights = scaled_dot_product_attention(q, k, v, mask=np.zeros((2, 3, 1), bool))
    np.testing.assert_array_equal(np.array(weights), np.ones((2, 3, 1)))
    np.testing.assert_allclose(np.array(context), np.repeat(v, 3, axis=1), rtol=1e-6)


def _attention_and_gradients(q, k, v, mask, upstream):
    """Float64 NumPy attention softmax(q k^T / sqrt(d)) v, masked positions filled with -1e9
    before the softmax, and the gradients of sum(upstream * context) in q, k and v."""
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    logits = np.where(mask, logits, -1e9) if mask is not None else logits
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    d_weights = upstream @ np.swapaxes(v, -1, -2)
    d_logits = weights * (d_weights - (d_weights * weights).sum(-1, keepdims=True))
    if mask is not None:
        d_logits = np.where(mask, d_logits, 0.0)
    d_logits /= np.sqrt(q.shape[-1])
    return (weights @ v, d_logits @ k, np.swapaxes(d_logits, -1, -2) @ q,
            np.swapaxes(weights, -1, -2) @ upstream)


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("dtype, tolerance", [("float32", 1e-5), ("bfloat16", 3e-2)])
def test_a_tensorflow_train_step_s_attention_and_gradients_are_exact(dtype, tolerance, masked):
    # Under mixed_bfloat16 the scores' product stays float32 and its gradient's two products
    # run in bfloat16 (`_bfloat16_scores`); checked against float64 NumPy either way.
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("TensorFlow's train step")
    import tensorflow as tf

    from zoo.bench.step_products import graph_products

    rng = np.random.default_rng(1)
    q, k, v, upstream = (tf.cast(rng.normal(size=shape) * 2.0, dtype) for shape in
                         ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4), (2, 3, 5, 4)))
    mask = np.tril(np.ones((5, 7), bool), 1)
    mask[2] = False  # a row masked everywhere: its weights become uniform
    mask = tf.constant(mask) if masked else None

    @tf.function(autograph=False)
    def step(*tensors):
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            context, _ = scaled_dot_product_attention(*tensors, mask=mask)
        return (context, *tape.gradient(context, tensors, output_gradients=upstream))

    wide_products = [s for s in graph_products(step, q, k, v)
                     if s[0].startswith("BatchMatMul") and s[2] == "float32"]
    assert len(wide_products) == (6 if dtype == "float32" else 1)  # bfloat16: the scores'
    wide = [np.asarray(tf.cast(t, "float64")) for t in (q, k, v, upstream)]
    expected = _attention_and_gradients(*wide[:3], None if mask is None else mask.numpy(),
                                        wide[3])
    for got, want in zip(step(q, k, v), expected):
        assert got.dtype == q.dtype
        scale = np.abs(want).max()
        np.testing.assert_allclose(np.asarray(tf.cast(got, "float64")) / scale, want / scale,
                                   atol=tolerance)
