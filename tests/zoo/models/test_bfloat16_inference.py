"""Inference in bfloat16 from Python (`zoo.models.surgery.in_dtype`, `zoo.load(dtype=...)`):
the translator's key/value cache in the compute dtype, greedy and beam search running on it
with the float32 model's logits within bfloat16 rounding, and a loaded ViT's
probabilities."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

import zoo
from zoo.models.surgery import in_dtype
from zoo.models.translator.model import Translator
from zoo.models.vit.model import VisionTransformer
from zoo.training.errors import UserError

TRANSLATOR = dict(vocabulary_size=120, hidden_dim=64, num_encoder_layers=1,
                  num_decoder_layers=2, num_heads=4, intermediate_dim=128, dropout=0.0)


@pytest.fixture(scope="module")
def translators():
    keras.utils.set_random_seed(0)
    model = Translator(**TRANSLATOR)
    model.ensure_built()
    return model, in_dtype(model, "mixed_bfloat16")


def test_the_key_value_cache_follows_the_compute_dtype(translators):
    model, bf16 = translators
    source = np.random.default_rng(0).integers(4, 120, (2, 6)).astype("int32")
    for translator, dtype in ((model, "float32"), (bf16, "bfloat16")):
        memory, _ = translator.encode(source)
        self_cache, cross_cache = translator.initial_cache(memory, 5)
        for keys, values in self_cache + cross_cache:
            # Half the bytes per cached position in bfloat16: what the beam step reads.
            assert (ops.dtype(keys), ops.dtype(values)) == (dtype, dtype)


def test_bfloat16_search_runs_and_its_logits_are_float32_s_within_rounding(translators):
    model, bf16 = translators
    assert bf16.dtype_policy.name == "mixed_bfloat16" and model.dtype_policy.name == "float32"
    source = np.random.default_rng(1).integers(4, 120, (2, 6)).astype("int32")
    target = np.random.default_rng(2).integers(4, 120, (2, 5)).astype("int32")
    inputs = {"source_ids": source, "target_ids": target}
    reference = ops.convert_to_numpy(model(inputs))
    logits = ops.convert_to_numpy(bf16(inputs))
    assert logits.dtype == np.float32  # logits in float32 under mixed precision
    assert np.abs(logits - reference).max() < 0.05 * np.abs(reference).max()
    for beam in (1, 2):
        tokens, scores = bf16.generate(source, beam_size=beam, max_length=6)
        assert tuple(ops.shape(tokens))[0] == 2 and np.isfinite(
            ops.convert_to_numpy(scores)).all()


def test_load_with_a_dtype_gives_the_model_in_it(tmp_path):
    keras.utils.set_random_seed(0)
    model = VisionTransformer(image_size=16, patch_size=4, num_classes=5, hidden_dim=32,
                              num_layers=1, num_heads=2, intermediate_dim=64,
                              head_initializer="glorot_uniform")
    images = np.random.default_rng(0).integers(0, 256, (3, 16, 16, 3)).astype("uint8")
    expected = model.predict_on_batch(images)
    model.save(tmp_path / "vit.keras")
    loaded = zoo.load(str(tmp_path / "vit.keras"), dtype="mixed_bfloat16")
    assert loaded.dtype_policy.name == "mixed_bfloat16"
    assert all(w.dtype == "float32" for w in loaded.weights)
    np.testing.assert_allclose(loaded.predict_on_batch(images), expected, atol=0.05)
    with pytest.raises(UserError, match="^unknown dtype 'bf16'; expected a Keras dtype"):
        zoo.load(str(tmp_path / "vit.keras"), dtype="bf16")
