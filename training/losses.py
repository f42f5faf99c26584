"""Token-level cross-entropy and accuracy for sequence models, ignoring padding.

For a translator the labels are `(batch, T)` token ids, padded with `pad_id`, and the model
returns `(batch, T, V)` logits. Padding must not count: the loss is the mean over real tokens,
and so is the accuracy.

Label smoothing follows section 5.4 of "Attention Is All You Need" (epsilon_ls = 0.1): the
target distribution puts `1 - e` on the true token and spreads `e` uniformly over the whole
vocabulary, `q = (1 - e) * onehot(y) + e / V`, so that

    loss = -sum_v q_v log p_v = (1 - e) * CE(y, p) + e * mean_v(-log p_v).
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

# Probabilities (from_logits=False) are clipped to [_EPSILON, 1] before the log.
_EPSILON = 1e-7


def _non_pad_weights(y_true: Any, pad_id: int | None, sample_weight: Any) -> Any:
    """(batch, T) float32 weights: 0 on padding, else the sample weight (1 if none)."""
    y_true = ops.convert_to_tensor(y_true)
    if pad_id is None:
        weights = ops.ones(ops.shape(y_true), dtype="float32")
    else:
        weights = ops.cast(ops.not_equal(y_true, pad_id), "float32")
    if sample_weight is not None:
        sample_weight = ops.cast(ops.convert_to_tensor(sample_weight), "float32")
        # A per-sequence weight (batch,) applies to every token of the sequence.
        while len(sample_weight.shape) < len(weights.shape):
            sample_weight = ops.expand_dims(sample_weight, -1)
        weights = weights * sample_weight
    return weights


def _check_ranks(y_true: Any, y_pred: Any) -> None:
    if len(y_true.shape) + 1 != len(y_pred.shape):
        raise ValueError(
            "expected integer labels of shape (batch, T) and predictions of shape "
            f"(batch, T, vocabulary_size); got labels of shape {tuple(y_true.shape)} and "
            f"predictions of shape {tuple(y_pred.shape)}"
        )


@keras.saving.register_keras_serializable(package="zoo")
class MaskedSparseCrossEntropy(keras.losses.Loss):
    """Sparse categorical cross-entropy with label smoothing that ignores padded positions.

    Computed in float32 whatever the dtype of the logits (`mixed_float16` logits would lose
    the small probabilities that smoothing looks at). Positions whose label is `pad_id` get
    weight 0, and the default reduction divides by the number of remaining tokens, so the
    loss is the mean over real tokens of the batch. A `sample_weight` of shape `(batch,)` or
    `(batch, T)` multiplies the token weights (and the divisor is their sum).

    Args:
        label_smoothing: The smoothing mass `e` in [0, 1), spread uniformly over the
            vocabulary. 0 gives plain cross-entropy.
        pad_id: The label id of padding, or None to count every position.
        from_logits: Whether predictions are logits (True) or probabilities.
        reduction: A Keras loss reduction. The default, "mean_with_sample_weight", gives the
            mean over non-pad tokens; None or "none" returns per-token losses (0 at padding).
        name: The loss name shown in training logs.

    Example (in training: `model.compile(optimizer="adam", loss=loss,
    metrics=[masked_accuracy])`):
        >>> import numpy as np
        >>> loss = MaskedSparseCrossEntropy(label_smoothing=0.0, pad_id=0)
        >>> labels = np.array([[2, 1, 0]])       # the last position is padding
        >>> logits = np.zeros((1, 3, 4), "float32")  # uniform: -log(1/4) = 1.3863 a token
        >>> logits[0, 2, 0] = 10.0               # would lower the mean if padding counted
        >>> round(float(loss(labels, logits)), 4)  # the mean over the 2 real tokens
        1.3863
    """

    def __init__(
        self,
        label_smoothing: float = 0.1,
        pad_id: int | None = 0,
        from_logits: bool = True,
        reduction: str | None = "mean_with_sample_weight",
        name: str = "masked_sparse_cross_entropy",
    ) -> None:
        if not 0.0 <= float(label_smoothing) < 1.0:
            raise ValueError(f"label_smoothing must lie in [0, 1); got {label_smoothing!r}")
        super().__init__(name=name, reduction=reduction, dtype="float32")
        self.label_smoothing = float(label_smoothing)
        self.pad_id = None if pad_id is None else int(pad_id)
        self.from_logits = bool(from_logits)

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        # The padding mask becomes the sample weight, so that Keras' reduction divides by the
        # number of real tokens (and still combines it with any mask carried by y_pred).
        weights = _non_pad_weights(y_true, self.pad_id, sample_weight)
        return super().__call__(y_true, y_pred, sample_weight=weights)

    def call(self, y_true: Any, y_pred: Any) -> Any:
        _check_ranks(y_true, y_pred)
        labels = ops.cast(y_true, "int32")
        if self.pad_id is not None:
            # Padding may use an id outside the vocabulary (-1); gather a valid row instead,
            # its loss is weighted by 0 anyway.
            labels = ops.where(ops.equal(labels, self.pad_id), 0, labels)
        y_pred = ops.cast(y_pred, "float32")
        if self.from_logits:
            log_probs = ops.log_softmax(y_pred, axis=-1)
        else:
            log_probs = ops.log(ops.clip(y_pred, _EPSILON, 1.0))
        # (batch, T): -log p(true token)
        nll = -ops.squeeze(ops.take_along_axis(log_probs, labels[..., None], axis=-1), -1)
        if self.label_smoothing == 0.0:
            return nll
        uniform = -ops.mean(log_probs, axis=-1)  # (batch, T): cross-entropy against 1/V
        return (1.0 - self.label_smoothing) * nll + self.label_smoothing * uniform

    def get_config(self) -> dict:
        return {
            "label_smoothing": self.label_smoothing,
            "pad_id": self.pad_id,
            "from_logits": self.from_logits,
            "reduction": self.reduction,
            "name": self.name,
        }


def masked_accuracy(y_true: Any, y_pred: Any, pad_id: int = 0) -> Any:
    """Fraction of non-pad positions whose arg-max prediction equals the label.

    As a compiled metric (`metrics=[masked_accuracy]`) Keras averages this value over
    batches, each batch counting the same; `MaskedAccuracy` counts every token the same.

    Args:
        y_true: Integer labels, `(batch, T)`.
        y_pred: Logits or probabilities, `(batch, T, V)`.
        pad_id: The label id of padding.

    Returns:
        A float32 scalar; 0 for a batch that is all padding.
    """
    correct, weights = _correct_and_weights(y_true, y_pred, pad_id)
    return ops.divide_no_nan(ops.sum(correct * weights), ops.sum(weights))


def _correct_and_weights(y_true: Any, y_pred: Any, pad_id: int | None) -> tuple[Any, Any]:
    y_true = ops.convert_to_tensor(y_true)
    y_pred = ops.convert_to_tensor(y_pred)
    _check_ranks(y_true, y_pred)
    predicted = ops.argmax(y_pred, axis=-1)
    correct = ops.equal(ops.cast(y_true, "int32"), ops.cast(predicted, "int32"))
    correct = ops.cast(correct, "float32")
    return correct, _non_pad_weights(y_true, pad_id, None)


@keras.saving.register_keras_serializable(package="zoo")
class MaskedAccuracy(keras.metrics.Metric):
    """Token accuracy over non-pad positions, accumulated exactly over an epoch.

    Args:
        pad_id: The label id of padding, or None to count every position.
        name: The metric name shown in training logs.
        dtype: The dtype of the accumulators.
    """

    def __init__(
        self, pad_id: int | None = 0, name: str = "masked_accuracy", dtype: Any = None
    ) -> None:
        super().__init__(name=name, dtype=dtype)
        self.pad_id = None if pad_id is None else int(pad_id)
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        correct, _ = _correct_and_weights(y_true, y_pred, self.pad_id)
        weights = _non_pad_weights(y_true, self.pad_id, sample_weight)
        self.correct.assign_add(ops.cast(ops.sum(correct * weights), self.dtype))
        self.count.assign_add(ops.cast(ops.sum(weights), self.dtype))

    def result(self) -> Any:
        return ops.divide_no_nan(self.correct, self.count)

    def reset_state(self) -> None:
        self.correct.assign(0.0)
        self.count.assign(0.0)

    def get_config(self) -> dict:
        return {"pad_id": self.pad_id, "name": self.name, "dtype": self.dtype}
