"""Images and texts into CLIP's towers' inputs, with TensorFlow ops (`tf.data`, exports).

Images: resized to the tower's size (bilinear, antialiased) and normalised with the
checkpoint's mean and standard deviation per channel (OpenAI's by default), by the zoo's
`ImageConverter`. Hugging Face's `CLIPImageProcessor` resizes the shorter side and crops the
centre instead, so a non-square photo scores slightly differently from the reference pipeline;
square images at the model's size give the reference's pixels exactly.
Texts: `<|startoftext|>` ids `<|endoftext|>`, cut and padded to the context length, by
`zoo.text.clip_tokenizer.CLIPTokenizer`, which travels with the model as files of the
`.keras` archive (`save_assets`), not in its config.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import keras

from zoo.models.image_converter import ImageConverter
from zoo.models.task import Preprocessor
from zoo.text.clip_tokenizer import CONTEXT_LENGTH, CLIPTokenizer
from zoo.training.errors import UserError

# OpenAI CLIP's image normalisation (its `CLIPImageProcessor`'s `image_mean` / `image_std`).
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


@keras.saving.register_keras_serializable(package="zoo")
class CLIPPreprocessor(Preprocessor):
    """CLIP's image converter and tokenizer.

    Args:
        image_size: side (or `(height, width)`) of the image tower's images.
        mean, std: per-channel normalisation of pixels in [0, 1].
        sequence_length: the text tower's context length.
        num_channels: channels of the images.
        tokenizer: the `CLIPTokenizer` (None until `load_assets` reads it, or for a model
            given token ids only).
        **kwargs: base layer arguments.

    Example:
    >>> import numpy as np
    >>> preprocessor = CLIPPreprocessor(32)
    >>> pixels = preprocessor.image_converter(np.full((1, 64, 64, 3), 255, "uint8"))
    >>> tuple(pixels.shape), round(float(pixels[0, 0, 0, 0]), 4)
    ((1, 32, 32, 3), 1.9303)
    """

    def __init__(self, image_size: int | tuple[int, int],
                 mean: Sequence[float] = OPENAI_MEAN, std: Sequence[float] = OPENAI_STD,
                 sequence_length: int = CONTEXT_LENGTH, num_channels: int = 3,
                 tokenizer: CLIPTokenizer | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.image_size = image_size
        self.mean = [float(m) for m in mean]
        self.std = [float(s) for s in std]
        if len(self.mean) != num_channels or len(self.std) != num_channels or min(
                self.std) <= 0:
            raise UserError(f"mean and std need {num_channels} values, std positive; got "
                            f"mean {self.mean}, std {self.std}")
        self.sequence_length = sequence_length
        self.num_channels = num_channels
        self.tokenizer = tokenizer
        # (x / 255 - mean) / std = x * scale + offset
        self.image_converter = ImageConverter(
            image_size, scale=[1 / (255 * s) for s in self.std],
            offset=[-m / s for m, s in zip(self.mean, self.std)], num_channels=num_channels,
            owner="CLIP", name="image_converter")

    def require_tokenizer(self) -> CLIPTokenizer:
        if self.tokenizer is None:
            raise UserError("this CLIP has no tokenizer: give it token ids, or load a model "
                            "with one (zoo.load)")
        return self.tokenizer

    def token_ids(self, texts: Any) -> Any:
        """`(batch, sequence_length)` int32 ids of a batch of strings (TensorFlow ops)."""
        return self.require_tokenizer().pack(texts, self.sequence_length)[0]

    def call(self, inputs: dict) -> dict:
        """`{"images": 0..255 images, "texts": strings}` to `{"images", "token_ids"}`; the
        images stay as they are (the task converts them in its own call)."""
        return {"images": inputs["images"], "token_ids": self.token_ids(inputs["texts"])}

    def save_assets(self, dir_path: str) -> None:
        """Writes the tokenizer's files into the `.keras` assets."""
        if self.tokenizer is not None:
            self.tokenizer.save(dir_path)

    def load_assets(self, dir_path: str) -> None:
        """Reads the tokenizer back from the `.keras` assets."""
        if os.path.exists(os.path.join(dir_path, "vocab.json")):
            self.tokenizer = CLIPTokenizer.from_folder(dir_path, self.sequence_length)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"image_size": self.image_size, "mean": list(self.mean),
                       "std": list(self.std), "sequence_length": self.sequence_length,
                       "num_channels": self.num_channels})
        return config


def pair_inputs(preprocessor: CLIPPreprocessor, pairs: Any) -> Any:
    """`CLIP.fit`'s inputs from raw pairs: a dict of `images` (n, 0..255) and `texts` (n
    strings) becomes arrays of `images` and `token_ids`, tokenized once, not every epoch; a
    `tf.data.Dataset` of `(images, texts)` batches is mapped to `{"images", "token_ids"}`
    (each epoch tokenizes again: pre-tokenize a large corpus).

    Raises:
        UserError: no tokenizer, or images and texts of different counts.
    """
    import numpy as np
    import tensorflow as tf

    from zoo.models.vit.image_batch import as_image_batch
    from zoo.text.base import _as_strings

    preprocessor.require_tokenizer()
    if not isinstance(pairs, dict):
        return pairs.map(lambda images, texts: {"images": images,
                                                "token_ids": preprocessor.token_ids(texts)},
                         num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)
    images = as_image_batch(pairs["images"], preprocessor.num_channels)
    texts = _as_strings(pairs["texts"])
    if len(images) != len(texts):
        raise UserError(f"fit needs one text per image; got {len(images)} images and "
                        f"{len(texts)} texts")
    return {"images": images, "token_ids": np.asarray(preprocessor.token_ids(texts))}
