"""CLIP learns (image, text) pairs with the contrastive loss: on twelve synthetic images
(four colours, three shapes) with templated captions, a tiny CLIP's loss falls and its
zero-shot accuracy on those captions rises; LoRA trains only its factors and projections."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tests.zoo.clip_checkpoint import write_tokenizer_files
from zoo.models.clip.model import CLIP
from zoo.text.clip_tokenizer import CLIPTokenizer

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (30, 40, 220),
           "white": (240, 240, 240)}
SHAPES = ("square", "circle", "stripe")


def _image(colour: tuple[int, int, int], shape: str) -> np.ndarray:
    y, x = np.mgrid[:32, :32]
    if shape == "square":
        inside = (abs(y - 16) < 9) & (abs(x - 16) < 9)
    elif shape == "circle":
        inside = (y - 16) ** 2 + (x - 16) ** 2 < 100
    else:
        inside = abs(y - 16) < 3
    image = np.full((32, 32, 3), 20, "uint8")
    image[inside] = colour
    return image


def _pairs() -> tuple[np.ndarray, list[str]]:
    labels = [f"{c} {s}" for c in COLOURS for s in SHAPES]
    images = np.stack([_image(COLOURS[c], s) for c in COLOURS for s in SHAPES])
    return images, labels


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    folder = write_tokenizer_files(tmp_path_factory.mktemp("clip_fit"))
    return CLIPTokenizer.from_folder(folder, sequence_length=12)


def _accuracy(clip: CLIP, images: np.ndarray, labels: list[str]) -> float:
    probabilities = clip.zero_shot(images, labels)
    return float(np.mean(probabilities.argmax(axis=1) == np.arange(len(labels))))


@pytest.mark.slow
def test_loss_falls_and_zero_shot_accuracy_rises(tokenizer):
    keras.utils.set_random_seed(0)
    clip = CLIP.from_architecture("clip-tiny", tokenizer=tokenizer, context_length=12)
    images, labels = _pairs()
    before = _accuracy(clip, images, labels)
    clip.compile(optimizer=keras.optimizers.Adam(2e-3))
    history = clip.fit({"images": images, "texts": [f"a photo of a {x}" for x in labels]},
                       batch_size=12, epochs=100, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.5 * losses[0], losses
    after = _accuracy(clip, images, labels)
    assert after >= 0.5 and after > before + 0.25, (before, after)


def test_lora_trains_the_factors_and_projections_only(tokenizer):
    clip = CLIP.from_architecture("clip-tiny", tokenizer=None, vocabulary_size=
                                  tokenizer.vocabulary_size, context_length=12)
    clip.enable_lora(2)
    trained = {w.path.split("/")[-1] for w in clip.trainable_weights}
    assert trained == {"lora_kernel_a", "lora_kernel_b", "kernel"}
    assert len(clip.trainable_weights) == 4 * 2 * 2 + 2  # 4 blocks, q and v, A and B; 2 kernels
    frozen = [w.numpy().copy() for w in clip.backbone.vision.encoder_blocks[0].weights[:2]]
    ids = np.full((4, 12), tokenizer.end_id)
    ids[:, 0] = np.arange(4)
    clip.compile(optimizer=keras.optimizers.Adam(1e-2))
    clip.fit({"images": np.zeros((4, 32, 32, 3), "uint8") + np.arange(4)[:, None, None, None]
              * 60, "token_ids": ids}, batch_size=4, epochs=1, verbose=0)
    for before, weight in zip(frozen, clip.backbone.vision.encoder_blocks[0].weights[:2]):
        np.testing.assert_array_equal(before, weight.numpy())
    merged = clip.merge_lora()
    assert not merged.lora_layers() and len(merged.weights) == len(clip.weights) - 16
