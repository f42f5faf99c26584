"""The causal language model: a GPT-2 backbone, its tied head, generation and `fit` on text.

    logits = LN(h_L) E_token^T        the head is the token embedding (tied, as GPT-2's)

`generate` and `stream` come from `zoo.models.causal_lm.generating`; `enable_lora` and
`merge_lora` from `CausalLMLora` (`zoo.models.lora`).
"""

from __future__ import annotations

from typing import Any

import keras

from zoo.models.causal_lm import architectures as _architectures  # noqa: F401  (registers)
from zoo.models.causal_lm.backbone import GPT2Backbone
from zoo.models.causal_lm.generating import CausalLMGeneration
from zoo.models.causal_lm.preprocessor import CausalLMPreprocessor, is_text
from zoo.models.lora import LoraAdaptation
from zoo.models.task import Task
from zoo.training.errors import UserError


class CausalLMLora(LoraAdaptation):
    """LoRA of a `CausalLM`: the attention projections of its decoder blocks; nothing else
    trains (the head is the token embedding, the largest weight). A merged copy keeps the
    preprocessor and its tokenizer."""

    def _lora_blocks(self) -> list[keras.layers.Layer]:
        return list(self.backbone.decoder_blocks)

    def _lora_prepare(self) -> None:
        self.ensure_built()
        self._generate_functions = {}  # compiled generation read the kernels without factors


@keras.saving.register_keras_serializable(package="zoo")
class CausalLM(Task, CausalLMGeneration, CausalLMLora):
    """A causal (next-token) language model: GPT-2 and the models built like it.

    Args:
        backbone: the `GPT2Backbone` (without cross-attention).
        preprocessor: the `CausalLMPreprocessor` with the tokenizer (None: ids only).
        **kwargs: base model arguments (`name`).

    Call arguments:
        inputs: a dict of `token_ids` `(batch, T)` and `padding_mask` `(batch, T)`.
        training: whether dropout is active.

    Returns:
        float32 next-token logits `(batch, T, vocabulary_size)`.

    Example:
    >>> import numpy as np
    >>> lm = CausalLM.from_architecture("gpt2-tiny")
    >>> logits = lm({"token_ids": np.array([[1, 2, 3]]), "padding_mask": np.ones((1, 3))})
    >>> tuple(logits.shape)
    (1, 3, 512)
    >>> len(lm.generate_ids([[1, 2, 3]], max_new_tokens=4)[0]) <= 4
    True
    """

    _serialised_parts = ("backbone", "preprocessor")

    def __init__(self, backbone: GPT2Backbone,
                 preprocessor: CausalLMPreprocessor | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(backbone, GPT2Backbone) or backbone.cross_attention:
            raise UserError("CausalLM needs a GPT2Backbone without cross-attention; got "
                            f"{type(backbone).__name__}")
        self.backbone = backbone
        self.preprocessor = preprocessor
        self._generate_functions: dict = {}

    @classmethod
    def from_architecture(cls, name: str, **overrides: Any) -> "CausalLM":
        """An untrained language model of a registered architecture (`zoo models`), without
        a tokenizer; `overrides` replace the backbone's arguments."""
        return cls(GPT2Backbone.from_architecture(name, **overrides))

    @classmethod
    def architectures(cls) -> list[str]:
        """The names `from_architecture` accepts (the backbone's)."""
        return GPT2Backbone.architectures()

    @property
    def end_id(self) -> int:
        """The end-of-text id: the tokenizer's, else the vocabulary's last (GPT-2's)."""
        if self.preprocessor is not None and self.preprocessor.tokenizer is not None:
            return self.preprocessor.tokenizer.end_id
        return self.backbone.vocabulary_size - 1

    def build(self, input_shape: Any = None) -> None:
        if not self.backbone.built:
            self.backbone.build()

    def logits(self, hidden: Any) -> Any:
        """float32 logits of `(batch, T, hidden_dim)` hidden states: the tied head."""
        return self.backbone.token_embedding(hidden, reverse=True)

    def call(self, inputs: dict, training: bool | None = None) -> Any:
        return self.logits(self.backbone(inputs, training=training))

    def compile(self, optimizer: Any = "auto", loss: Any = "auto", weighted_metrics: Any = "auto",
                **kwargs: Any) -> None:
        """`keras.Model.compile` with keras-hub's defaults for a language model: AdamW at
        2e-5, the cross-entropy of the logits, and accuracy over the real tokens."""
        if optimizer == "auto":
            optimizer = keras.optimizers.AdamW(2e-5)
        if loss == "auto":
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        if weighted_metrics == "auto":
            weighted_metrics = [keras.metrics.SparseCategoricalAccuracy()]
        super().compile(optimizer=optimizer, loss=loss, weighted_metrics=weighted_metrics,
                        **kwargs)

    def fit(self, x: Any = None, y: Any = None, batch_size: int | None = None,
            **kwargs: Any) -> Any:
        """`keras.Model.fit`, also on raw text: a list of strings or a `tf.data.Dataset` of
        strings is packed by the preprocessor (`CausalLMPreprocessor.pack`: next-token
        labels, padding weighted 0), a list in a new order every epoch unless `shuffle=False`
        (as `fit` takes arrays). Compiles with `compile()`'s defaults if not compiled."""
        if is_text(x):
            if y is not None:
                raise UserError("fit on text takes no y: the labels are the next tokens")
            if self.preprocessor is None:
                raise UserError("fit on text needs the model's preprocessor (a tokenizer)")
            x = self.preprocessor.text_dataset(x, batch_size,
                                               shuffle=kwargs.pop("shuffle", True))
            batch_size, kwargs["shuffle"] = None, False  # the dataset shuffles itself
        if not self.compiled:
            self.compile()
        self._generate_functions = {}
        return super().fit(x, y, batch_size=batch_size, **kwargs)
