"""Scaled dot-product attention, eq. (1) of "Attention Is All You Need".

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Two implementations that agree numerically:

- `scaled_dot_product_attention`: the explicit equation. It returns the attention weights
  (for visualisation and head analysis) and computes logits and softmax in float32 whatever
  the input dtype, so that `mixed_float16` cannot overflow.
- `fused_attention`: `keras.ops.dot_product_attention`, which lets the backend pick a fused
  kernel (cuDNN flash attention on GPUs where the shapes allow it). It returns no weights.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from .keras_internals import gradient_recording

# Logits of masked positions. A large finite value (not -inf) keeps a row that is masked
# everywhere finite (it becomes uniform, as in `keras.layers.Softmax`), and it is applied in
# float32, where it is representable.
MASKED_LOGIT = -1e9


def check_attention_shapes(query: Any, key: Any, value: Any) -> None:
    """Raises ValueError unless query, key and value have one rank, query and key one last
    dimension, and key and value one length (static dims only)."""
    if len(query.shape) != len(key.shape) or len(key.shape) != len(value.shape):
        raise ValueError(
            "query, key and value must have the same rank; got shapes "
            f"{tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}"
        )
    if query.shape[-1] is not None and key.shape[-1] is not None and (
        query.shape[-1] != key.shape[-1]
    ):
        raise ValueError(
            "query and key must have the same last dimension (d_k); got "
            f"{query.shape[-1]} and {key.shape[-1]}"
        )
    if key.shape[-2] is not None and value.shape[-2] is not None and (
        key.shape[-2] != value.shape[-2]
    ):
        raise ValueError(
            "key and value must have the same length; got key length "
            f"{key.shape[-2]} and value length {value.shape[-2]}"
        )


def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    mask: Any | None = None,
    scale: float | None = None,
) -> tuple[Any, Any]:
    """Computes softmax(Q K^T / sqrt(d_k)) V and the attention weights.

    Works on plain arrays of any leading shape, `(..., T, d_k)` for queries and
    `(..., S, d_k)`, `(..., S, d_v)` for keys and values; a head axis is just one more
    leading axis.

    Args:
        query: `(..., T, d_k)` queries.
        key: `(..., S, d_k)` keys.
        value: `(..., S, d_v)` values.
        mask: optional boolean (or 0/1) array broadcastable to `(..., T, S)`; `True` where a
            query may attend to a key. Masked weights are exactly zero unless a whole row is
            masked, in which case that row is uniform.
        scale: the factor applied to the logits; `1 / sqrt(d_k)` by default.

    Returns:
        `(context, weights)`: the context vectors `(..., T, d_v)` in the dtype of `value`,
        and the float32 attention weights `(..., T, S)`, each row summing to one.

    Example:
    >>> import numpy as np
    >>> x = np.array([[1., 2., 3.], [4., 5., 6.]])
    >>> w = np.ones((3, 2)) / 10
    >>> context, weights = scaled_dot_product_attention(x @ w, x @ w, x @ w)
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 2), (2, 2))
    """
    query, key, value = (ops.convert_to_tensor(t) for t in (query, key, value))
    check_attention_shapes(query, key, value)
    if scale is None:
        scale = 1.0 / float(query.shape[-1]) ** 0.5
    # Logits and softmax in float32, so that float16 and bfloat16 inputs cannot overflow.
    if (keras.backend.backend() == "tensorflow" and gradient_recording()
            and {keras.backend.standardize_dtype(t.dtype) for t in (query, key)} == {"bfloat16"}
            and tuple(query.shape[:-2]) == tuple(key.shape[:-2])):
        logits = _bfloat16_scores(query, key) * scale
    else:
        logits = ops.matmul(
            ops.cast(query, "float32"), ops.swapaxes(ops.cast(key, "float32"), -1, -2)
        ) * scale
    if mask is not None:
        mask = ops.convert_to_tensor(mask)
        check_mask_broadcasts(mask, logits.shape)
        logits = ops.where(ops.cast(mask, "bool"), logits, MASKED_LOGIT)
    if logits.shape[-1] == 1:  # one key: its weight is 1 (and Keras warns of such a softmax)
        weights = ops.ones_like(logits)
    else:
        weights = ops.softmax(logits, axis=-1)
    context = ops.matmul(ops.cast(weights, value.dtype), value)
    return context, weights


def _bfloat16_scores(query: Any, key: Any) -> Any:
    """`Q K^T` in float32 from bfloat16 queries and keys, as the plain product, for a
    TensorFlow train step: its gradient's two products take the scores' gradient in bfloat16,
    so that they run on bfloat16 kernels as the step's other products do, not in float32
    (docs/performance-log.md, 2026-11-29 day). What they produce, the gradients of bfloat16
    queries and keys, is rounded to bfloat16 in either form."""
    import tensorflow as tf

    @tf.custom_gradient
    def scores(query: Any, key: Any) -> tuple:
        def grad(upstream: Any) -> tuple:
            narrow = tf.cast(upstream, query.dtype)
            return tf.matmul(narrow, key), tf.matmul(narrow, query, transpose_a=True)

        return tf.matmul(tf.cast(query, tf.float32), tf.cast(key, tf.float32),
                         transpose_b=True), grad

    return scores(query, key)


def fused_attention(
    query: Any,
    key: Any,
    value: Any,
    mask: Any | None = None,
    scale: float | None = None,
    flash_attention: bool | None = None,
) -> Any:
    """Attention through `keras.ops.dot_product_attention` (no weights returned).

    Args:
        query: `(batch, T, heads, d_k)`.
        key: `(batch, S, heads, d_k)`.
        value: `(batch, S, heads, d_v)`.
        mask: optional boolean mask broadcastable to `(batch, heads, T, S)`.
        scale: logit scale, `1 / sqrt(d_k)` by default.
        flash_attention: passed to Keras: `None` lets the backend decide.

    Returns:
        `(batch, T, heads, d_v)` context vectors.

    Example:
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(1, 4, 2, 8)).astype("float32")
    >>> tuple(fused_attention(x, x, x).shape)
    (1, 4, 2, 8)
    """
    if mask is not None:
        mask = _whole_query_axis(ops.cast(mask, "bool"), query.shape[1])
    return ops.dot_product_attention(
        query, key, value, mask=mask, scale=scale, flash_attention=flash_attention
    )


def _whole_query_axis(mask: Any, queries: int | None) -> Any:
    """`mask` with its query axis (the second last) as long as the queries where it was 1.

    cuDNN's fused attention (JAX on a GPU) refuses a mask or bias that broadcasts over the
    queries, as a padding mask of shape `(batch, 1, 1, S)` does: Keras then logged the
    refusal's traceback at every trace and fell back to XLA's attention (the first GPU loan's
    translator, 2026-11-28). A boolean `(batch, 1, T, S)` costs T x S bytes a sentence."""
    if len(mask.shape) < 2 or mask.shape[-2] != 1 or queries in (None, 1):
        return mask
    shape = ops.shape(mask)
    return ops.broadcast_to(mask, (*shape[:-2], queries, shape[-1]))


def fused_attention_supported(dtype: Any) -> bool:
    """Whether `fused_attention` runs a fused kernel for this dtype on this backend.

    Not on TensorFlow, whose `dot_product_attention` has no fused kernel: it is the same
    equation written as einsums over the `(batch, T, heads, d)` layout, and their gradients
    transpose on every call; the explicit equation's heads-first matrix products run
    faster (the ViT-tiny train step's attention: docs/performance-log.md, 2026-11-25,
    "Attention's projections as 2-D products"). Nor for float16 on JAX on a CPU: XLA there
    has no float16 dot_general with float32 accumulation, which JAX's fused attention asks
    for.

    Args:
        dtype: the dtype of the queries, keys and values.

    Returns:
        True where `fused_attention` should be preferred to `scaled_dot_product_attention`.
    """
    if keras.backend.backend() == "tensorflow":
        return False
    if keras.backend.standardize_dtype(dtype) != "float16" or keras.backend.backend() != "jax":
        return True
    import jax

    return jax.default_backend() != "cpu"


def causal_mask(query_length: int, key_length: int | None = None, offset: Any = 0) -> Any:
    """A boolean `(query_length, key_length)` mask, `True` where key index <= query index.

    Args:
        query_length: number of queries.
        key_length: number of keys; `query_length` by default.
        offset: the absolute position of the first query (an int or a scalar tensor), for
            a query block that continues a longer sequence, as in cached decoding.

    Returns:
        The lower-triangular pattern of masked (decoder) self-attention, shifted right by
        `offset`: query i sees key j when j <= i + offset.

    Example:
    >>> import numpy as np
    >>> np.asarray(causal_mask(2, 3, offset=1)).astype(int)
    array([[1, 1, 0],
           [1, 1, 1]])
    """
    key_length = query_length if key_length is None else key_length
    rows = ops.expand_dims(ops.arange(query_length, dtype="int32") + offset, -1)
    cols = ops.expand_dims(ops.arange(key_length, dtype="int32"), 0)
    return ops.greater_equal(rows, cols)


def check_mask_broadcasts(mask: Any, target_shape: tuple) -> None:
    """Raises ValueError unless `mask` broadcasts to `target_shape` (static dims only)."""
    mask_shape = tuple(mask.shape)
    if len(mask_shape) > len(target_shape):
        raise ValueError(
            f"attention mask of shape {mask_shape} has more axes than the attention "
            f"logits {tuple(target_shape)}"
        )
    for m, t in zip(reversed(mask_shape), reversed(tuple(target_shape))):
        if m is not None and t is not None and m not in (1, t):
            raise ValueError(
                f"attention mask of shape {mask_shape} does not broadcast to the attention "
                f"logits of shape {tuple(target_shape)}"
            )

