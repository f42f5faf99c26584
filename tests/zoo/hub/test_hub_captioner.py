"""Image captioning by handle: tiny random `VisionEncoderDecoderModel`s (a ViT encoder, a GPT-2
decoder with cross-attention, the tokens set as nlpconnect's vit-gpt2 captioner has them) made
and saved by transformers, with a byte-level BPE vocabulary trained by `tokenizers` and the
image processor's files, loaded as a folder and as an offline `hf://` handle: the logits equal
Hugging Face's, and greedy captions are token-equal to `generate(num_beams=1,
do_sample=False)`. One checkpoint has equal widths (nlpconnect's), the other a narrower
encoder (Hugging Face's `enc_to_dec_proj`) and ImageNet's normalisation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.zoo.hub._hub_helpers import publish, randomise, torch  # noqa: F401  (skips)
from tests.zoo.text._byte_pair_files import VOCABULARY_SIZE, write_tiny_bpe

import zoo  # noqa: E402
from zoo.models.captioner.captioner import ImageCaptioner  # noqa: E402
from zoo.training.errors import UserError  # noqa: E402

END = VOCABULARY_SIZE - 1
NEW_TOKENS = 12
# (encoder width, image mean, image std) of the two checkpoints.
SHAPES = {"equal-widths": (32, (0.5,) * 3, (0.5,) * 3),
          "projected": (24, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))}


def _write_captioner(folder, encoder_width: int, mean: tuple, std: tuple):
    from transformers import (GPT2Config, ViTConfig, ViTImageProcessorPil,
                              VisionEncoderDecoderConfig, VisionEncoderDecoderModel)

    write_tiny_bpe(folder)
    encoder = ViTConfig(image_size=32, patch_size=8, hidden_size=encoder_width,
                        num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=2 * encoder_width)
    decoder = GPT2Config(vocab_size=VOCABULARY_SIZE, n_positions=64, n_embd=32, n_layer=2,
                         n_head=4, add_cross_attention=True, is_decoder=True,
                         bos_token_id=END, eos_token_id=END)
    config = VisionEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    for key in ("decoder_start_token_id", "bos_token_id", "eos_token_id", "pad_token_id"):
        setattr(config, key, END)  # as nlpconnect/vit-gpt2-image-captioning has them
    model = randomise(VisionEncoderDecoderModel(config), seed=4, scale=2.0)
    model.save_pretrained(folder, safe_serialization=True)
    ViTImageProcessorPil(size={"height": 32, "width": 32}, image_mean=list(mean),
                         image_std=list(std)).save_pretrained(folder)
    return model


@pytest.fixture(scope="module")
def captioner_folders(tmp_path_factory) -> dict:
    """Each checkpoint of `SHAPES`: `{name: (folder, reference model)}`."""
    folders = {}
    for name, shape in SHAPES.items():
        folder = tmp_path_factory.mktemp(name)
        folders[name] = folder, _write_captioner(folder, *shape)
    return folders


def _images(count: int = 3) -> np.ndarray:
    return np.random.default_rng(7).integers(0, 256, (count, 32, 32, 3), dtype=np.uint8)


def _hf_pixels(folder, images: np.ndarray):
    from transformers import ViTImageProcessorPil

    processor = ViTImageProcessorPil.from_pretrained(str(folder))
    return processor(images=list(images), return_tensors="pt")["pixel_values"]


def _hf_greedy(reference, pixels) -> list[list[int]]:
    with torch.no_grad():
        out = reference.generate(pixel_values=pixels, max_new_tokens=NEW_TOKENS,
                                 num_beams=1, do_sample=False).numpy()
    rows = [[int(t) for t in row[1:]] for row in out]  # after the decoder's start token
    return [row[:row.index(END)] if END in row else row for row in rows]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_logits_and_greedy_captions_equal_hugging_faces(captioner_folders, shape, hub_cache):
    folder, reference = captioner_folders[shape]
    captioner = zoo.load(str(folder))
    assert isinstance(captioner, ImageCaptioner)
    images = _images()
    pixels = _hf_pixels(folder, images)
    ids = [END, 5, 77, 301, 12]
    with torch.no_grad():
        expected = reference(pixel_values=pixels,
                             decoder_input_ids=torch.tensor([ids] * len(images))).logits
    logits = captioner({"images": images, "token_ids": np.array([ids] * len(images)),
                        "padding_mask": np.ones((len(images), len(ids)))})
    np.testing.assert_allclose(np.asarray(logits), expected.numpy(), atol=2e-4, rtol=1e-4)
    greedy = _hf_greedy(reference, pixels)
    assert captioner.caption_ids(images, beam_size=1, max_length=NEW_TOKENS) == greedy
    texts = captioner.caption(images, beam_size=1, max_length=NEW_TOKENS)
    assert texts == [t.strip() for t in captioner.preprocessor.tokenizer.decode(greedy)]


def _logits(captioner, images: np.ndarray) -> np.ndarray:
    ids = np.array([[END, 9, 40]] * len(images))
    return np.asarray(captioner({"images": images, "token_ids": ids,
                                 "padding_mask": np.ones(ids.shape)}))


def test_handle_offline_is_the_same_model(captioner_folders, hub_cache):
    folder, _ = captioner_folders["equal-widths"]
    publish(hub_cache, "nlpconnect/vit-gpt2-image-captioning", folder)
    captioner = zoo.load("hf://nlpconnect/vit-gpt2-image-captioning")
    assert isinstance(captioner, ImageCaptioner)
    # The kept .keras file, tokenizer and image normalisation included.
    again = ImageCaptioner.from_preset("hf://nlpconnect/vit-gpt2-image-captioning")
    images = _images(2)
    np.testing.assert_array_equal(_logits(again, images), _logits(captioner, images))
    assert again.preprocessor.tokenizer.vocabulary == captioner.preprocessor.tokenizer.vocabulary


def test_config_is_checked_before_building(captioner_folders, tmp_path, hub_cache):
    folder, _ = captioner_folders["equal-widths"]
    for path in folder.iterdir():
        if path.name != "config.json":
            (tmp_path / path.name).symlink_to(path)
    config = json.loads((folder / "config.json").read_text())
    for change, message in (
            ({"decoder": {**config["decoder"], "n_embd": 4096}},
             r"\(decoder\): n_embd 4096 is the size of no tensor"),
            ({"encoder": {**config["encoder"], "model_type": "deit"}},
             "only a ViT encoder with a GPT-2 decoder"),
            ({"decoder_start_token_id": 3}, "decoder_start_token_id 3 is not the end")):
        (tmp_path / "config.json").write_text(json.dumps({**config, **change}))
        with pytest.raises(UserError, match=message):
            zoo.load(str(tmp_path))
