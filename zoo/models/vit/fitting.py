"""A Vision Transformer that is ready to fit: compiled on its first `fit` or `evaluate`.

`zoo.load` returns models without their training configuration, and `with_new_head` and the
other surgery methods make new ones; keras-hub's classifiers and the zoo's translator come
ready to train, so the ViT does too. A model that was never compiled is compiled on its first
`fit` (or `evaluate`, `zoo.models.task.Task.fit`) with `classifier_compile_arguments`: what
the training recipe (`zoo.recipes.vit.compile_vit`) uses, for integer labels and at a
fine-tuning rate. A model you compiled yourself keeps your choice.
"""

from __future__ import annotations

from typing import Any

import keras

from zoo.training.optimizers import adamw_no_decay_on_norms

# The fine-tuning rate of `zoo finetune vit` (zoo.recipes.settings.ViTFinetuneRecipe).
FINE_TUNING_RATE = 1e-4


def classifier_compile_arguments(num_classes: int, learning_rate: float = FINE_TUNING_RATE
                                  ) -> dict:
    """What an uncompiled ViT is compiled with on its first `fit` or `evaluate`.

    The recipe's AdamW (weight decay 0.05, none on norms, biases, position embeddings and
    the class token; clipping at global norm 1), its cross-entropy on logits
    (`from_logits=True`: the model outputs logits) for integer labels, accuracy, and
    top-5 accuracy where there are more than 5 classes.

    Args:
        num_classes: the classifier's number of classes.
        learning_rate: AdamW's rate.

    Returns:
        The keyword arguments of `compile`.
    """
    metrics: list[Any] = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
    if num_classes > 5:
        metrics.append(keras.metrics.SparseTopKCategoricalAccuracy(5, name="top5"))
    return {"optimizer": adamw_no_decay_on_norms(learning_rate, weight_decay=0.05,
                                                 clipnorm=1.0),
            "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "metrics": metrics}
