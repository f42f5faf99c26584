"""Model surgery on a translator: a new one with this one's weights and tokenizer, and other
training options (dropout rates, compute dtype) for fine-tuning.

`Translator.with_training_options` calls `with_training_options` here; the pieces it shares
with the ViT's surgery are in `zoo.models.surgery`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import keras
import numpy as np

from zoo.models.surgery import copy_weights, training_option_changes

if TYPE_CHECKING:
    from zoo.models.translator.model import Translator


def with_training_options(translator: "Translator", *, dropout: float | None = None,
                          attention_dropout: float | None = None,
                          dtype: str | keras.DTypePolicy | None = None) -> "Translator":
    """A new translator with this one's weights and tokenizer, and other dropout rates or
    compute dtype.

    For fine-tuning: a translator saved in float32 can go on training with more dropout
    and in mixed precision (`dtype="mixed_bfloat16"`: float32 variables, bfloat16
    compute). The weights are copied unchanged.

    Args:
        translator: the translator whose weights and tokenizer the new one gets.
        dropout: the new dropout rate of the embeddings and blocks (`None`: kept).
        attention_dropout: the new dropout rate of the attention weights (`None`: kept).
        dtype: the new dtype policy, e.g. `keras.config.dtype_policy()` (`None`: kept).

    Returns:
        A new `Translator` (not compiled).
    """
    changes = training_option_changes(dropout, attention_dropout, dtype)
    model = type(translator).from_config({**translator.get_config(), **changes})
    model.tokenizer = translator.tokenizer
    ids = np.full((1, 2), translator.special_ids()[0], "int32")
    for each in (translator, model):  # builds the variables of either, if not yet built
        each({"source_ids": ids, "target_ids": ids})
    copy_weights(translator, model)
    return model
