"""CLIP, the dual encoder (Radford et al. 2021): the task of the CLIP family, as keras-hub's
`models/<family>/`:

    images 0..255 --image converter--> pixels --image tower--> I_e --+
                                                                     +--> exp(t) cos(I_e, T_e)
    texts --tokenizer--> ids -----------------> text tower --> T_e --+

The towers, projections and temperature are the backbone's
(`zoo.models.clip.backbone.CLIPBackbone`); the image converter and tokenizer the
preprocessor's (`zoo.models.clip.preprocessor.CLIPPreprocessor`); embeddings and zero-shot
classification `CLIPInference`'s (`zoo.models.clip.zero_shot`). Here: the forward pass to the
similarity matrix, and `fit` on (image, text) pairs with the symmetric contrastive loss, the
batch's other pairs as negatives (`zoo.training.contrastive_loss`).
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from zoo.models.clip.backbone import CLIPBackbone
from zoo.models.clip.preprocessor import CLIPPreprocessor, pair_inputs
from zoo.models.clip.zero_shot import CLIPInference
from zoo.models.task import Task
from zoo.text.clip_tokenizer import CLIPTokenizer
from zoo.training.contrastive_loss import symmetric_contrastive_loss
from zoo.training.errors import UserError


def _unit(x: Any) -> Any:
    return x / ops.maximum(ops.sqrt(ops.sum(ops.square(x), axis=-1, keepdims=True)), 1e-12)


@keras.saving.register_keras_serializable(package="zoo")
class CLIP(CLIPInference, Task):
    """A CLIP-style dual encoder: image and text embeddings in one space.

    Args:
        backbone: the `CLIPBackbone`.
        preprocessor: the `CLIPPreprocessor` (image converter, tokenizer); None for a model
            given normalised pixels and token ids only.
        **kwargs: base model arguments (`name`).

    Call arguments:
        inputs: a dict of `images` (0..255, any size; normalised pixels without a
            preprocessor) and `token_ids` `(texts, context_length)`.
        training: whether dropout is active.

    Returns:
        float32 `logits_per_image` `(images, texts)`: the temperature times the cosine
        similarities (`logits_per_text` is its transpose).

    Example:
    >>> import numpy as np
    >>> clip = CLIP.from_architecture("clip-tiny")
    >>> logits = clip({"images": np.zeros((2, 32, 32, 3), "uint8"),
    ...                "token_ids": np.full((3, 77), 49407)})
    >>> tuple(logits.shape)
    (2, 3)
    """

    _serialised_parts = ("backbone", "preprocessor")

    def __init__(self, backbone: CLIPBackbone, preprocessor: CLIPPreprocessor | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(backbone, CLIPBackbone):
            raise UserError(f"CLIP needs a CLIPBackbone; got {type(backbone).__name__}")
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.built = True

    @classmethod
    def from_architecture(cls, name: str, tokenizer: CLIPTokenizer | None = None,
                          **overrides: Any) -> "CLIP":
        """An untrained CLIP of a registered architecture (`zoo models`) with OpenAI's image
        normalisation; `tokenizer` for texts (its vocabulary must fit the text tower);
        `overrides` replace the backbone's arguments."""
        if tokenizer is not None:
            overrides.setdefault("vocabulary_size", tokenizer.vocabulary_size)
            overrides.setdefault("end_token_id", tokenizer.end_id)
        backbone = CLIPBackbone.from_architecture(name, **overrides)
        if tokenizer is not None and tokenizer.vocabulary_size != backbone.vocabulary_size:
            raise UserError(f"the tokenizer has {tokenizer.vocabulary_size} pieces but the "
                            f"text tower {backbone.vocabulary_size}")
        preprocessor = CLIPPreprocessor(
            backbone.image_size, sequence_length=backbone.context_length,
            num_channels=backbone.num_channels, tokenizer=tokenizer)
        model = cls(backbone, preprocessor)
        model.preset_name = name
        return model

    @classmethod
    def architectures(cls) -> list[str]:
        """The names `from_architecture` accepts (the backbone's)."""
        return CLIPBackbone.architectures()

    @property
    def logit_scale(self) -> keras.Variable:
        """The learned temperature t (Hugging Face's `logit_scale`): logits are scaled by
        exp(t), clipped at 100 (`CLIPBackbone.similarity_scale`)."""
        return self.backbone.logit_scale

    def preprocessor_images(self, images: Any) -> Any:
        """The image tower's pixels of 0..255 images (the images as given without a
        preprocessor)."""
        if self.preprocessor is None:
            return images
        return self.preprocessor.image_converter(images)

    def call(self, inputs: dict, training: bool | None = None) -> Any:
        if not isinstance(inputs, dict) or not {"images", "token_ids"} <= set(inputs):
            raise UserError("CLIP takes a dict of 'images' and 'token_ids'; got "
                            f"{sorted(inputs) if isinstance(inputs, dict) else type(inputs)}")
        pixels = self.preprocessor_images(inputs["images"])
        images = _unit(self.backbone.encode_images(pixels, training=training))
        texts = _unit(self.backbone.encode_texts(inputs["token_ids"], training=training))
        return self.backbone.similarity_scale() * ops.matmul(images, ops.transpose(texts))

    def compute_loss(self, x: Any = None, y: Any = None, y_pred: Any = None,
                     sample_weight: Any = None, training: bool = True) -> Any:
        """The symmetric contrastive loss of the batch's similarity matrix (pair i is image
        i and text i; `y` is not used), plus any regularisation losses."""
        loss = symmetric_contrastive_loss(y_pred)
        if self.losses:
            loss = loss + ops.sum(self.losses)
        return loss

    def default_compile_arguments(self) -> dict:
        """AdamW at 1e-5 with weight decay 0.1: a fine-tuning rate for a trained CLIP."""
        return {"optimizer": keras.optimizers.AdamW(1e-5, weight_decay=0.1)}

    def fit(self, x: Any = None, y: Any = None, **kwargs: Any) -> keras.callbacks.History:
        """`keras.Model.fit` on (image, text) pairs: `x` a dict of `images` (0..255) and
        `texts` (strings), tokenized once (`pair_inputs`), or a `tf.data.Dataset` of
        `(images, texts)` batches; a dict of `images` and `token_ids` trains as any Keras
        model's inputs. Each batch's other pairs are the negatives, so a batch should not
        hold two pairs with the same text. Compiles with `default_compile_arguments` if not
        compiled."""
        if y is not None:
            raise UserError("CLIP's fit takes no y: image i matches text i")
        if _is_pairs(x):
            if self.preprocessor is None:
                raise UserError("fit on texts needs the model's preprocessor (a tokenizer)")
            x = pair_inputs(self.preprocessor, x)
        return super().fit(x, **kwargs)

    # LoRA (zoo.models.lora): both towers' attention; the projections train too.
    def _lora_blocks(self) -> list[keras.layers.Layer]:
        return [*self.backbone.vision.encoder_blocks, *self.backbone.text.decoder_blocks]

    def _lora_trained_layers(self) -> list[keras.layers.Layer]:
        return [self.backbone.image_projection, self.backbone.text_projection]


def _is_pairs(x: Any) -> bool:
    """Whether `fit`'s `x` holds raw pairs: a dict with `texts`, or a dataset of strings."""
    if isinstance(x, dict):
        return "texts" in x
    spec = getattr(x, "element_spec", None)
    if isinstance(spec, (tuple, list)) and len(spec) == 2:
        return getattr(getattr(spec[1], "dtype", None), "name", None) == "string"
    return False
