"""The captioner the captioning tests share: "captioner-tiny" with a tiny byte-level BPE
vocabulary, its weights drawn afresh at a scale where the image decides the caption (a freshly
initialised GPT-2 writes almost the same tokens whatever it reads)."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np

from tests.zoo.text._byte_pair_files import write_tiny_bpe
from zoo.models.captioner.captioner import ImageCaptioner
from zoo.text.byte_pair import BytePairTokenizer


def tiny_captioner(folder: Path, seed: int) -> ImageCaptioner:
    """A tiny captioner with the vocabulary written into `folder`; weights from `seed`."""
    keras.utils.set_random_seed(seed)
    tokenizer = BytePairTokenizer.from_folder(write_tiny_bpe(folder))
    model = ImageCaptioner.from_architecture("captioner-tiny", tokenizer)
    model.ensure_built()
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        shape = tuple(variable.shape)
        if variable is model.decoder.token_embedding.embeddings:
            value = rng.normal(0.0, 1.0, shape)
        elif len(shape) >= 2:
            value = rng.normal(0.0, 1.5 / np.sqrt(shape[0]), shape)
        elif "gamma" in variable.path:
            value = 1.0 + rng.normal(0.0, 0.2, shape)
        else:
            value = rng.normal(0.0, 0.2, shape)
        variable.assign(value.astype("float32"))
    return model


def caption_images(count: int, seed: int = 0) -> np.ndarray:
    """`count` random 32 x 32 uint8 images."""
    return np.random.default_rng(seed).integers(0, 256, (count, 32, 32, 3), dtype=np.uint8)
