"""(image, caption) pairs into a captioner's inputs, labels and weights, with TensorFlow ops.

As Hugging Face trains a `VisionEncoderDecoderModel` with teacher forcing: the caption's ids,
after the decoder's start token, are the decoder's inputs, and the same ids shifted by one,
ended by the end token, its labels. GPT-2's end-of-text token is also its start token (the
`decoder_start_token_id` of a ViT-GPT-2 captioner), so a caption is packed as a causal language
model's text is (`zoo.models.causal_lm.preprocessor.CausalLMPreprocessor.pack`): wrapped in
end tokens, cut, padded, the padding weighted 0. The images go through the image converter
inside the model's `call` (0..255, any size), so that `fit`, `caption` and the export see the
same pixels.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from zoo.models.causal_lm.preprocessor import CausalLMPreprocessor
from zoo.models.image_converter import ImageConverter
from zoo.models.vit.image_batch import as_image_batch
from zoo.layers.validation import positive_int
from zoo.text.byte_pair import BytePairTokenizer
from zoo.training.errors import UserError


@keras.saving.register_keras_serializable(package="zoo")
class CaptionerPreprocessor(CausalLMPreprocessor):
    """A captioner's image converter and byte-level BPE tokenizer; packs (image, caption)
    pairs for `fit`.

    Args:
        image_converter: the `ImageConverter` that resizes and normalises the images.
        tokenizer: the decoder's `BytePairTokenizer` (None: a captioner of ids only).
        sequence_length: the caption tokens read in `fit` (longer captions are cut).
        add_start_token: True only: a caption is always read after the start token, since
            the searches start every caption from it (the argument is kept for the base
            class's config).
        **kwargs: base layer arguments.
    """

    def __init__(self, image_converter: ImageConverter,
                 tokenizer: BytePairTokenizer | None = None, sequence_length: int = 32,
                 add_start_token: bool = True, **kwargs: Any) -> None:
        if add_start_token is not True:
            raise UserError("a captioner reads every caption after its start token, as its "
                            f"searches start from it: add_start_token must be True; got "
                            f"{add_start_token!r}")
        super().__init__(tokenizer, sequence_length, **kwargs)
        if not isinstance(image_converter, ImageConverter):
            raise UserError(f"image_converter must be an ImageConverter; got "
                            f"{type(image_converter).__name__}")
        self.image_converter = image_converter

    def pack_pairs(self, images: Any, captions: Any) -> tuple[dict, Any, Any]:
        """`({"images", "token_ids", "padding_mask"}, labels, sample_weight)` of a batch of
        images (0..255) and their captions (strings), in TensorFlow ops (also inside
        `tf.data.Dataset.map`, for a dataset of pairs of your own)."""
        x, labels, weights = self.pack(captions)
        return {"images": images, **x}, labels, weights

    def pairs_dataset(self, images: Any, captions: Any, batch_size: int | None,
                      shuffle: bool = True, seed: int | None = None) -> Any:
        """A `tf.data.Dataset` of packed batches: what `ImageCaptioner.fit` trains on.

        Args:
            images: `(n, height, width, channels)` 0..255, or a list of such images of one
                size.
            captions: `n` strings, one per image.
            batch_size: pairs per batch (32 when None).
            shuffle: draw the pairs in a new order every epoch.
            seed: the shuffle's seed (None: a fresh one).

        Raises:
            UserError: not one caption per image, a caption that is not text, or bad images.
        """
        import tensorflow as tf

        batch_size = positive_int(32 if batch_size is None else batch_size, "batch_size",
                                  error=UserError)
        pixels = as_image_batch(images, self.image_converter.num_channels)
        if isinstance(captions, (str, bytes)) or not all(
                isinstance(c, (str, bytes)) for c in captions):
            raise UserError("fit on (images, captions) takes one caption string per image "
                            "as y")
        captions = [c.decode("utf-8") if isinstance(c, bytes) else c for c in captions]
        if len(captions) != len(pixels):
            raise UserError(f"fit on (images, captions) takes one caption per image; got "
                            f"{len(pixels)} images and {len(captions)} captions")
        # Tokenized once, not once an epoch (a dataset's map runs again every epoch).
        dataset = tf.data.Dataset.from_tensor_slices(self.pack_pairs(pixels, captions))
        if shuffle:
            dataset = dataset.shuffle(len(captions), seed=seed)
        return dataset.batch(batch_size).prefetch(2)

    def get_config(self) -> dict:
        config = super().get_config()
        config["image_converter"] = keras.saving.serialize_keras_object(self.image_converter)
        return config

    @classmethod
    def from_config(cls, config: dict) -> "CaptionerPreprocessor":
        config = dict(config)
        config["image_converter"] = keras.saving.deserialize_keras_object(
            config["image_converter"])
        return cls(**config)


def is_caption_list(y: Any) -> bool:
    """Whether `fit`'s `y` is captions: a non-empty list (or array) of strings."""
    if isinstance(y, np.ndarray):
        return y.dtype.kind in "OUS" and y.ndim == 1 and len(y) > 0
    return isinstance(y, (list, tuple)) and bool(y) and all(
        isinstance(c, (str, bytes)) for c in y)
