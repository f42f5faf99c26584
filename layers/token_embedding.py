"""Token embeddings tied to the output projection ("Attention Is All You Need", section 3.4).

"We share the same weight matrix between the two embedding layers and the pre-softmax
linear transformation ... In the embedding layers, we multiply those weights by
sqrt(d_model)." One `(vocabulary_size, embedding_dim)` matrix `E` serves both ways:
`E[ids] * sqrt(d)` on the way in, `hidden @ E^T` (unscaled) on the way out.
"""

from __future__ import annotations

import math
from typing import Any

import keras
import numpy as np
from keras import ops

from .int8_route import int8_products_here
from .keras_internals import mark_quantized
from .validation import positive_int


def _against_table(hidden: Any, table: Any) -> Any:
    """`hidden @ table^T`, `(..., dim)` against `(vocabulary, dim)` -> `(..., vocabulary)`.

    One contraction over the table's second axis, with no transpose of the table as an op of
    its own: in a JAX loop on a CPU (a search's steps), XLA fused `matmul(h, transpose(E))`
    with whatever came next (a bias, a mask added to the logits) and then copied and
    transposed the whole table at every step, several times the cost of the step without the
    copy (figures: docs/performance-log.md, 2026-11-28). The leading axes are
    folded into rows first: TensorFlow's gradient of an einsum over `...d` materialised a
    `(..., vocabulary, dim)` tensor for the table's gradient (a fit of GPT-2 ran out of
    memory), and one over named batch axes a `(batch, dim, vocabulary)` one."""
    rows = ops.reshape(hidden, (-1, ops.shape(hidden)[-1]))
    logits = ops.einsum("nd,vd->nv", rows, table)
    return ops.reshape(logits, (*ops.shape(hidden)[:-1], ops.shape(table)[0]))


def _is_integer(x: Any) -> bool:
    return "int" in keras.backend.standardize_dtype(x.dtype)


def _concrete_values(x: Any) -> np.ndarray | None:
    """The values of an eager tensor, or None for a symbolic or traced one."""
    try:
        return ops.convert_to_numpy(x)
    except (NotImplementedError, TypeError, RuntimeError, ValueError):
        # A tf.Tensor in a graph, a JAX tracer, a torch meta tensor: no values to check.
        return None


@keras.saving.register_keras_serializable(package="zoo")
class TokenEmbedding(keras.layers.Layer):
    """Embeds token ids, and projects hidden states back to logits with the same matrix.

    Ids are checked against `[0, vocabulary_size)` when the layer is called eagerly. Inside
    a compiled function (`fit`, `jit`, `tf.function`) they cannot be, and then behave as in
    `keras.layers.Embedding` (`keras.ops.take`): an id in `[-vocabulary_size, 0)` wraps to
    the end of the table, and an id `>= vocabulary_size` gives NaN rows on JAX, an
    `InvalidArgumentError` on TensorFlow on CPU and zero rows on TensorFlow on GPU.

    Args:
        vocabulary_size: the number of rows of the embedding matrix.
        embedding_dim: the size `d_model` of each embedding.
        scale: whether to multiply embeddings by `sqrt(embedding_dim)` (section 3.4).
        mask_zero: whether id 0 is padding: then the output carries a Keras mask, `False`
            where the id is 0, that attention layers and losses downstream use.
        embeddings_initializer: the matrix's initializer. When None, a normal distribution
            with standard deviation `embedding_dim ** -0.5` (as in tensor2tensor and
            fairseq), so that the scaled embeddings have unit variance.
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: integer token ids `(batch, length)`; with `reverse=True`, hidden states
            `(batch, length, embedding_dim)`.
        reverse: whether to project hidden states to logits, `hidden @ E^T`, instead of
            embedding ids.

    Returns:
        Embeddings `(batch, length, embedding_dim)` in the compute dtype; with
        `reverse=True`, float32 logits `(batch, length, vocabulary_size)`, computed in
        float32 under mixed precision (the master weights are used, not a float16 copy).

    Example:
    >>> import numpy as np
    >>> layer = TokenEmbedding(vocabulary_size=100, embedding_dim=16)
    >>> hidden = layer(np.array([[5, 7, 0]]))
    >>> tuple(hidden.shape), tuple(layer(hidden, reverse=True).shape)
    ((1, 3, 16), (1, 3, 100))
    """

    def __init__(
        self,
        vocabulary_size: int,
        embedding_dim: int,
        scale: bool = True,
        mask_zero: bool = True,
        embeddings_initializer: str | keras.initializers.Initializer | dict | None = None,
        **kwargs: Any,
    ) -> None:
        # The reverse projection works on float32 hidden states and the float32 master
        # weights, so this layer casts by itself: Keras casts neither its float inputs
        # (autocast=False) nor its variable (added with autocast=False) to the compute dtype.
        kwargs.pop("autocast", None)
        super().__init__(autocast=False, **kwargs)
        self.vocabulary_size = positive_int(vocabulary_size, "vocabulary_size")
        self.embedding_dim = positive_int(embedding_dim, "embedding_dim")
        self.scale = bool(scale)
        self.mask_zero = bool(mask_zero)
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(
                stddev=embedding_dim ** -0.5
            )
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, input_shape: tuple | None = None) -> None:
        if self.quantization_mode == "int8":  # a quantized model being loaded
            self._int8_build()
        else:
            self.embeddings = self.add_weight(
                name="embeddings",
                shape=(self.vocabulary_size, self.embedding_dim),
                initializer=self.embeddings_initializer,
                trainable=True,
                autocast=False,
            )
        self.built = True

    def _int8_build(self) -> None:
        """The int8 table and one float32 scale per row (per token): a row serves both ways,
        as an embedding and as the weights of its token's logit."""
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.vocabulary_size, self.embedding_dim),
            initializer="zeros", dtype="int8", trainable=False, autocast=False)
        self.embeddings_scale = self.add_weight(
            name="embeddings_scale", shape=(self.vocabulary_size,), initializer="ones",
            dtype="float32", trainable=False, autocast=False)
        mark_quantized(self)

    def quantize(self, mode: str | None = None, type_check: bool = True,
                 config: Any = None) -> None:
        """Replaces the float table by int8 values and per-row scales, in place (Keras'
        `Model.quantize("int8")` calls this, as for its own `Embedding`).

        Row i is stored as `round(E[i] * s_i)` with `s_i = 127 / max|E[i]|`; lookups return
        `q[i] / s_i`, and logits are `(h_q @ q^T) / (s_h * s)` with the hidden state `h`
        quantized per position the same way (Keras' `Dense` int8 scheme).

        Args:
            mode: "int8"; other modes raise NotImplementedError (Keras then skips the layer).
            type_check: unused (Keras' signature).
            config: unused (Keras' signature).
        """
        if mode != "int8":
            raise NotImplementedError(
                f"TokenEmbedding quantizes to int8 only; got mode {mode!r}")
        values, scale = keras.quantizers.abs_max_quantize(
            ops.cast(self.embeddings, "float32"), axis=-1, to_numpy=True)
        del self.embeddings
        self._int8_build()
        self.embeddings.assign(values)
        self.embeddings_scale.assign(ops.squeeze(scale, axis=-1))
        self.dtype_policy = f"int8_from_{self.dtype_policy.name}"

    def _check_ids(self, ids: Any) -> None:
        values = _concrete_values(ids)
        if values is None or values.size == 0:
            return
        low, high = int(values.min()), int(values.max())
        if low < 0 or high >= self.vocabulary_size:
            raise ValueError(
                f"token ids must lie in [0, vocabulary_size={self.vocabulary_size}); got ids "
                f"from {low} to {high}"
            )

    def call(self, inputs: Any, reverse: bool = False) -> Any:
        if reverse:
            if inputs.shape[-1] is not None and inputs.shape[-1] != self.embedding_dim:
                raise ValueError(
                    f"reverse=True expects hidden states with last dimension "
                    f"embedding_dim={self.embedding_dim}; got shape {tuple(inputs.shape)}"
                )
            hidden = ops.cast(inputs, "float32")
            if self.quantization_mode == "int8":
                return self._int8_logits(hidden)
            return _against_table(hidden, ops.cast(self.embeddings, "float32"))
        if not _is_integer(inputs):
            raise ValueError(
                f"TokenEmbedding expects integer token ids; got dtype {inputs.dtype} "
                "(pass reverse=True to project hidden states to logits)"
            )
        self._check_ids(inputs)
        embedded = ops.take(self.embeddings, inputs, axis=0)  # float32 (int8 when quantized)
        if self.quantization_mode == "int8":
            scale = ops.take(self.embeddings_scale, inputs, axis=0)
            embedded = ops.cast(embedded, "float32") / ops.expand_dims(scale, -1)
        if self.scale:
            embedded = embedded * math.sqrt(self.embedding_dim)
        return ops.cast(embedded, self.compute_dtype)

    def _int8_call(self, inputs: Any, reverse: bool = False) -> Any:
        # Keras calls this instead of `call` once the layer is quantized; `call` reads the
        # int8 table itself.
        return self.call(inputs, reverse=reverse)

    def _int8_logits(self, hidden: Any) -> Any:
        """`hidden @ E^T` from the int8 table: an int8 x int8 product with int32 sums where
        that is the fast route (`int8_products_here`), else float against the widened table."""
        if not int8_products_here():
            logits = _against_table(hidden, ops.cast(self.embeddings, "float32"))
            return logits / self.embeddings_scale
        hidden_q, hidden_scale = keras.quantizers.abs_max_quantize(hidden, axis=-1)
        logits = _against_table(hidden_q, self.embeddings)  # int32
        return ops.cast(logits, "float32") / (hidden_scale * self.embeddings_scale)

    def compute_mask(self, inputs: Any, previous_mask: Any = None) -> Any:
        # Hidden states (reverse=True) keep whatever mask they carry: it marks the padded
        # positions of the logits, which the loss then skips.
        if not _is_integer(inputs):
            return previous_mask
        if not self.mask_zero:
            return None
        return ops.not_equal(inputs, 0)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size,
            "embedding_dim": self.embedding_dim,
            "scale": self.scale,
            "mask_zero": self.mask_zero,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        })
        return config
