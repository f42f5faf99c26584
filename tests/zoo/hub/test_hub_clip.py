"""CLIP from a checkpoint folder and from an `hf://` handle, against transformers'
`CLIPModel`: a tiny random model saved with `save_pretrained` (safetensors) beside tiny
tokenizer files (tests/zoo/clip_checkpoint.py); no download."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import zoo  # noqa: E402
from tests.zoo.clip_checkpoint import MEAN, STD, write_checkpoint  # noqa: E402
from tests.zoo.hub._hub_helpers import one_line_error, publish  # noqa: E402
from zoo.models.clip.model import CLIP  # noqa: E402

TEXTS = ["a photo of a red square", "A BLUE ship!", "two cats and 3 dogs", "ünïcode café"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_checkpoint(tmp_path_factory.mktemp("clip") / "tiny-clip")


def _reference(folder, images):
    import torch
    from transformers import CLIPModel, CLIPTokenizer

    model = CLIPModel.from_pretrained(folder).eval()
    tokens = CLIPTokenizer.from_pretrained(folder)(TEXTS, padding="max_length",
                                                  truncation=True, max_length=16,
                                                  return_tensors="pt")
    pixels = (images / 255.0 - np.array(MEAN)) / np.array(STD)
    pixels = torch.tensor(pixels.transpose(0, 3, 1, 2), dtype=torch.float32)
    with torch.no_grad():
        out = model(input_ids=tokens["input_ids"], pixel_values=pixels,
                    attention_mask=tokens["attention_mask"])
        image = model.get_image_features(pixel_values=pixels)
        text = model.get_text_features(input_ids=tokens["input_ids"],
                                       attention_mask=tokens["attention_mask"])
    as_numpy = [getattr(x, "pooler_output", x).numpy() for x in (image, text)]
    return as_numpy + [out.logits_per_image.numpy(), tokens["input_ids"].numpy()]


@pytest.mark.slow
def test_folder_equals_the_reference(checkpoint, hub_cache):
    images = np.random.default_rng(0).integers(0, 256, (3, 32, 32, 3)).astype("uint8")
    image_ref, text_ref, logits_ref, ids_ref = _reference(checkpoint, images)
    clip = zoo.load(str(checkpoint))
    assert isinstance(clip, CLIP)
    np.testing.assert_allclose(clip.encode_images(images), image_ref, atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(clip.encode_texts(TEXTS), text_ref, atol=2e-5, rtol=1e-4)
    np.testing.assert_array_equal(np.asarray(clip.preprocessor.token_ids(TEXTS)), ids_ref)
    logits = clip({"images": images, "token_ids": ids_ref})
    np.testing.assert_allclose(np.asarray(logits), logits_ref, atol=1e-4, rtol=1e-4)
    probabilities = clip.zero_shot(images, ["red square", "blue ship"])
    assert probabilities.shape == (3, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)


def test_handle_loads_offline_from_the_hub_cache(checkpoint, hub_cache):
    publish(hub_cache, "openai/clip-vit-base-patch32", checkpoint)
    clip = zoo.load("hf://openai/clip-vit-base-patch32")
    assert isinstance(clip, CLIP) and clip.preset_name == "clip-vit-base-patch32"
    assert clip.preprocessor.tokenizer.vocabulary_size == clip.backbone.vocabulary_size
    images = np.full((1, 48, 40, 3), 200, "uint8")  # another size: resized
    assert clip.encode_images(images, normalize=True).shape == (1, 24)


def test_a_misshapen_tensor_is_one_line(tmp_path, hub_cache):
    from safetensors.numpy import load_file, save_file

    folder = write_checkpoint(tmp_path / "bad")
    tensors = load_file(folder / "model.safetensors")
    tensors["text_projection.weight"] = tensors["text_projection.weight"][:, :16].copy()
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(ValueError) as error:
        zoo.load(str(folder))
    assert "'text_projection.weight' has shape (24, 16)" in one_line_error(error)
