"""The captioner's decoder: a tiny random Hugging Face GPT-2 with cross-attention
(`add_cross_attention=True`, as a `VisionEncoderDecoderModel`'s) converted into a
`GPT2Backbone(cross_attention=True)`: logits over an encoder's outputs equal transformers',
with and without the encoder's padding, and cached decoding equals the full pass."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from keras import ops  # noqa: E402

from tests.zoo.hub._hub_helpers import randomise  # noqa: E402
from zoo.converters.gpt2 import causal_lm_from_hf, gpt2_backbone_from_hf  # noqa: E402
from zoo.training.errors import UserError  # noqa: E402


@pytest.fixture(scope="module")
def decoder():
    config = transformers.GPT2Config(vocab_size=97, n_positions=32, n_embd=32, n_layer=2,
                                     n_head=4, add_cross_attention=True, bos_token_id=96,
                                     eos_token_id=96)
    return randomise(transformers.GPT2LMHeadModel(config), seed=5, scale=2.0)


def test_cross_attention_logits_and_cache_equal_hugging_faces(decoder):
    backbone = gpt2_backbone_from_hf(decoder.state_dict(), decoder.config)
    assert backbone.cross_attention
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 97, (2, 7))
    memory = rng.normal(size=(2, 5, 32)).astype("float32")
    memory_mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    with torch.no_grad():
        expected = decoder(torch.tensor(ids), encoder_hidden_states=torch.tensor(memory),
                           encoder_attention_mask=torch.tensor(memory_mask)).logits.numpy()
    hidden = backbone({"token_ids": ids, "padding_mask": np.ones_like(ids),
                       "encoder_sequence": memory, "encoder_padding_mask": memory_mask})
    logits = backbone.token_embedding(hidden, reverse=True)
    np.testing.assert_allclose(np.asarray(logits), expected, atol=1e-4, rtol=1e-4)

    # One token at a time over the caches: the full pass's hidden states.
    cache = backbone.empty_cache(2, 7)
    cross = backbone.compute_cross_attention_cache(memory)
    steps = []
    for i in range(7):
        out, cache = backbone.call_with_cache(ids[:, i:i + 1], cache, i, cross, memory_mask)
        steps.append(np.asarray(ops.convert_to_numpy(out)))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), np.asarray(hidden), atol=1e-5)


def test_a_decoder_with_cross_attention_is_no_language_model(decoder):
    with pytest.raises(UserError, match="captioner's decoder"):
        causal_lm_from_hf(decoder.state_dict(), decoder.config)
    backbone = gpt2_backbone_from_hf(decoder.state_dict(), decoder.config)
    with pytest.raises(UserError, match="pass encoder_sequence"):
        backbone({"token_ids": np.zeros((1, 2), "int32")})


def test_untied_head_and_unknown_tensors_are_refused(decoder):
    tensors = {k: v.numpy() for k, v in decoder.state_dict().items()}
    config = {**decoder.config.to_dict(), "add_cross_attention": False}
    plain = {k: v for k, v in tensors.items() if "cross" not in k}
    plain["lm_head.weight"] = plain["lm_head.weight"] + 1.0
    with pytest.raises(UserError, match="lm_head.weight differs"):
        causal_lm_from_hf(plain, config)
    plain["lm_head.weight"] = plain["transformer.wte.weight"]
    plain["transformer.h.0.extra.weight"] = np.zeros(3, "float32")
    with pytest.raises(UserError, match="not used by the conversion"):
        causal_lm_from_hf(plain, config)
