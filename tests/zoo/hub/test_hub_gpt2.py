"""GPT-2 by handle: a tiny random `GPT2LMHeadModel` made and saved by transformers, with a
byte-level BPE vocabulary trained by `tokenizers`, loaded as a folder (`zoo.load(folder)`) and
as `hf://gpt2` from an offline hub cache: its logits equal Hugging Face's, and greedy
generation of 20 new tokens is token-equal to `GPT2LMHeadModel.generate(do_sample=False)`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.zoo.hub._hub_helpers import publish, randomise, torch  # noqa: F401  (skips)
from tests.zoo.text._byte_pair_files import VOCABULARY_SIZE, write_tiny_bpe

import zoo  # noqa: E402
from zoo.models.causal_lm.causal_lm import CausalLM  # noqa: E402
from zoo.training.errors import UserError  # noqa: E402

PROMPTS = ["Once upon a time", "The cat sat", "naïve café 🤗"]


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = write_tiny_bpe(tmp_path_factory.mktemp("gpt2"))
    end = VOCABULARY_SIZE - 1
    config = GPT2Config(vocab_size=VOCABULARY_SIZE, n_positions=64, n_embd=32, n_layer=2,
                        n_head=4, bos_token_id=end, eos_token_id=end)
    model = randomise(GPT2LMHeadModel(config), seed=3, scale=2.0)
    model.save_pretrained(folder, safe_serialization=True)
    return folder, model


def _hf_reference(model, folder):
    from transformers import GPT2Tokenizer

    tokenizer = GPT2Tokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    return tokenizer, [tokenizer.encode(p) for p in PROMPTS]


@pytest.mark.slow
def test_folder_logits_and_greedy_tokens_equal_hugging_faces(gpt2_folder, hub_cache):
    folder, reference = gpt2_folder
    lm = zoo.load(str(folder))
    assert isinstance(lm, CausalLM)
    tokenizer, prompts = _hf_reference(reference, folder)
    ids = prompts[0]
    with torch.no_grad():
        expected = reference(torch.tensor([ids])).logits.numpy()
    logits = lm({"token_ids": np.array([ids]), "padding_mask": np.ones((1, len(ids)))})
    np.testing.assert_allclose(np.asarray(logits), expected, atol=1e-4, rtol=1e-4)
    ours = lm.generate_ids(prompts, max_new_tokens=20)  # a batch of unequal prompts
    for prompt, new in zip(prompts, ours):
        with torch.no_grad():
            out = reference.generate(torch.tensor([prompt]), max_new_tokens=20,
                                     do_sample=False, pad_token_id=VOCABULARY_SIZE - 1)
        expected_new = out[0, len(prompt):].tolist()
        end = VOCABULARY_SIZE - 1
        expected_new = expected_new[:expected_new.index(end)] if end in expected_new \
            else expected_new
        assert new == expected_new
    # Text prompts are read after the start token (keras-hub's convention): Hugging Face's
    # greedy continuation of the end-of-text id followed by the prompt's.
    start = [VOCABULARY_SIZE - 1] + prompts[0]
    with torch.no_grad():
        out = reference.generate(torch.tensor([start]), max_new_tokens=20, do_sample=False,
                                 pad_token_id=VOCABULARY_SIZE - 1)[0, len(start):].tolist()
    end = VOCABULARY_SIZE - 1
    expected_text = tokenizer.decode(out[:out.index(end)] if end in out else out)
    assert lm.generate(PROMPTS[:1], max_new_tokens=20)[0] == PROMPTS[0] + expected_text


@pytest.mark.slow
def test_handle_offline_is_the_same_model(gpt2_folder, hub_cache):
    folder, reference = gpt2_folder
    publish(hub_cache, "gpt2", folder)
    lm = zoo.load("hf://gpt2")
    assert isinstance(lm, CausalLM) and lm.preset_name == "gpt2"
    again = CausalLM.from_preset("hf://gpt2")  # the kept .keras file, tokenizer included
    ids = lm.preprocessor.tokenizer.encode(PROMPTS)
    assert again.generate_ids(ids, max_new_tokens=8) == lm.generate_ids(ids, max_new_tokens=8)
    assert again.generate(PROMPTS, max_new_tokens=8) == lm.generate(PROMPTS, max_new_tokens=8)


def test_config_is_checked_against_the_weights_before_building(gpt2_folder, tmp_path,
                                                                hub_cache):
    folder, _ = gpt2_folder
    for name in ("vocab.json", "merges.txt", "model.safetensors"):
        (tmp_path / name).symlink_to(folder / name)
    config = json.loads((folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "n_embd": 4096}))
    with pytest.raises(UserError, match="n_embd 4096 is the size of no tensor"):
        zoo.load(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({**config, "n_head": 5}))
    with pytest.raises(UserError, match="n_head 5 does not divide n_embd 32"):
        zoo.load(str(tmp_path))
