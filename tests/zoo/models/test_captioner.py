"""The image captioner on its own: the cached decoder step equals the full pass, beam search of
width 1 equals greedy search, an image's caption is the same alone or in a batch, `fit` on
(image, caption) pairs lowers the loss, a saved model keeps its tokenizer and converter, and
bad input is one clear error. Parity with Hugging Face: tests/zoo/hub/test_hub_captioner.py."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

from tests.zoo.models._tiny_captioner import caption_images, tiny_captioner
from tests.zoo.text._byte_pair_files import write_tiny_bpe
from zoo.generation.beam import beam_search
from zoo.models.captioner.captioner import ImageCaptioner
from zoo.models.captioner.preprocessor import CaptionerPreprocessor
from zoo.text.byte_pair import BytePairTokenizer
from zoo.training.errors import UserError

CAPTIONS = ["The cat sat on the mat.", "a little cat", "The quick brown fox jumps.",
            "Hello world!"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> BytePairTokenizer:
    return BytePairTokenizer.from_folder(write_tiny_bpe(tmp_path_factory.mktemp("bpe")))


@pytest.fixture(scope="module")
def captioner(tmp_path_factory) -> ImageCaptioner:
    return tiny_captioner(tmp_path_factory.mktemp("captioner"), seed=11)


def _numpy(x) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(x))


def test_cached_steps_equal_the_full_pass(captioner):
    images = caption_images(2)
    ids = np.array([[captioner.start_id, 5, 17, 230, 9, 61]] * 2)
    full = _numpy(captioner({"images": images, "token_ids": ids,
                             "padding_mask": np.ones(ids.shape)}))
    context = (captioner.decoder.compute_cross_attention_cache(captioner.encode(images)),)
    cache = captioner.decoder.empty_cache(2, ids.shape[1])
    for i in range(ids.shape[1]):
        logits, cache = captioner.next_logits(ids[:, i:i + 1], i, cache, context)
        np.testing.assert_allclose(_numpy(logits), full[:, i], atol=1e-5, rtol=1e-5)


def test_beam_of_one_is_greedy(captioner):
    images = caption_images(3, seed=1)
    greedy, greedy_scores = captioner.generate(images, beam_size=1, max_length=8)
    context = (captioner.decoder.compute_cross_attention_cache(captioner.encode(images)),)
    beam, beam_scores = beam_search(
        captioner.next_logits, captioner.decoder.empty_cache(3, 8), 3, 1, 8,
        captioner.start_id, captioner.end_id, pad_id=captioner.end_id, alpha=0.0,
        context=context)
    np.testing.assert_array_equal(_numpy(beam)[:, 0], _numpy(greedy))
    np.testing.assert_allclose(_numpy(beam_scores)[:, 0], _numpy(greedy_scores), atol=1e-5)


def test_a_caption_is_the_same_alone_or_in_a_batch(captioner):
    images = caption_images(3, seed=2)
    together = captioner.caption_ids(images, beam_size=3, max_length=6)
    alone = captioner.caption_ids(images, beam_size=3, max_length=6, batch_size=1)
    assert together == alone
    assert len({tuple(ids) for ids in alone}) == 3  # the images are told apart
    text = captioner.preprocessor.tokenizer.decode(alone[:1])[0]
    assert captioner.caption(images[0], beam_size=3, max_length=6) == [
        text.strip(" \t\n\v\f\r")]


def test_fit_on_images_and_captions_lowers_the_loss_and_saves(tokenizer, tmp_path):
    keras.utils.set_random_seed(3)
    model = ImageCaptioner.from_architecture("captioner-tiny", tokenizer)
    model.preprocessor.sequence_length = 12  # the captions' tokens, and their end
    # XLA's compilation costs more than these few steps save; JAX unjitted runs op by op.
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  jit_compile=keras.backend.backend() == "jax")
    images = caption_images(len(CAPTIONS), seed=3)
    history = model.fit(images, CAPTIONS, batch_size=4, epochs=8, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.6 * losses[0], losses
    path = tmp_path / "captioner.keras"
    model.save(path)
    import zoo

    loaded = zoo.load(str(path))
    assert isinstance(loaded, ImageCaptioner)
    assert loaded.preprocessor.tokenizer.vocabulary == tokenizer.vocabulary
    ids = np.array([[model.start_id, 40, 41]] * len(images))
    inputs = {"images": images, "token_ids": ids, "padding_mask": np.ones(ids.shape)}
    np.testing.assert_allclose(_numpy(loaded(inputs)), _numpy(model(inputs)), atol=1e-6)


def test_bad_input_is_one_clear_error(captioner):
    with pytest.raises(UserError, match="channels"):
        captioner.caption(np.zeros((2, 32, 32, 4), "uint8"))
    with pytest.raises(UserError, match="beam_size must be at least 1; got 0"):
        captioner.caption(caption_images(1), beam_size=0)
    with pytest.raises(UserError, match="max_length must be an integer from 1 to 64"):
        captioner.caption(caption_images(1), max_length=65)
    with pytest.raises(UserError, match="one caption per image"):
        captioner.fit(caption_images(2), CAPTIONS)
    with pytest.raises(UserError, match="unknown ImageCaptioner architecture"):
        ImageCaptioner.from_architecture("captioner-huge")
    # Its searches start every caption from the start token, so training must read it too.
    converter = captioner.preprocessor.image_converter
    with pytest.raises(UserError, match="add_start_token must be True; got False"):
        CaptionerPreprocessor(converter, add_start_token=False)
    config = captioner.preprocessor.get_config()
    assert config["add_start_token"] is True
    assert type(captioner.preprocessor).from_config(config).add_start_token is True


def test_lora_trains_the_blocks_factors_and_merges_with_the_tokenizer(tmp_path):
    model = tiny_captioner(tmp_path, seed=4)
    images, ids = caption_images(2), np.array([[model.start_id, 7, 8]] * 2)
    inputs = {"images": images, "token_ids": ids, "padding_mask": np.ones(ids.shape)}
    before = _numpy(model(inputs))
    model.enable_lora(2)
    assert all("lora" in w.path for w in model.trainable_weights)
    merged = model.merge_lora()
    assert merged.preprocessor.tokenizer is model.preprocessor.tokenizer
    np.testing.assert_allclose(_numpy(merged(inputs)), before, atol=1e-5)
