"""The learnable class token of BERT and ViT (Dosovitskiy et al., 2021, eq. 1: z_0^0 = x_class).

A single learned vector is prepended to every sequence; the encoder's output at that
position summarises the sequence and feeds the classification head.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class ClassToken(keras.layers.Layer):
    """Prepends one learned `(dim,)` token to each sequence of a batch.

    The weight, shaped `(1, 1, dim)`, is named "class_token" (optimizers may exclude it from
    weight decay by that name). A padding mask on the inputs is extended with `True` for
    the new first position.

    Args:
        initializer: the token's initializer (zeros by default, as in the ViT reference
            code).
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: a sequence `(batch, length, dim)`.

    Returns:
        `(batch, length + 1, dim)`: the token, then `inputs` unchanged.

    Example:
    >>> import numpy as np
    >>> tuple(ClassToken()(np.ones((2, 4, 8), "float32")).shape)
    (2, 5, 8)
    """

    def __init__(
        self,
        initializer: str | keras.initializers.Initializer | dict = "zeros",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape: tuple) -> None:
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                "ClassToken expects inputs of shape (batch, length, dim) with a known dim; "
                f"got shape {tuple(input_shape)}"
            )
        self.class_token = self.add_weight(
            name="class_token",
            shape=(1, 1, input_shape[-1]),
            initializer=self.initializer,
            trainable=True,
        )
        self.built = True

    def call(self, inputs: Any) -> Any:
        batch_size = ops.shape(inputs)[0]
        token = ops.cast(self.class_token, inputs.dtype)
        token = ops.broadcast_to(token, (batch_size, 1, inputs.shape[-1]))
        return ops.concatenate([token, inputs], axis=1)

    def compute_mask(self, inputs: Any, previous_mask: Any = None) -> Any:
        if previous_mask is None:
            return None
        first = ops.ones_like(previous_mask[:, :1], dtype="bool")
        return ops.concatenate([first, ops.cast(previous_mask, "bool")], axis=1)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        length = None if input_shape[1] is None else input_shape[1] + 1
        return (input_shape[0], length, input_shape[2])

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"initializer": keras.initializers.serialize(self.initializer)})
        return config
