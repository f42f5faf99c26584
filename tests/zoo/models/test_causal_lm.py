"""The causal language model on a tiny GPT-2 with a byte-level BPE vocabulary trained here:
cached generation equals the full pass's (and a prompt's tokens do not depend on its batch),
samplers repeat by seed, streaming gives `generate`'s text, the model saves with its tokenizer,
bad settings are one line, and `fit` on raw strings (and with LoRA) learns a tiny corpus'
style."""

from __future__ import annotations

import numpy as np
import pytest
from keras import ops

from tests.zoo.text._byte_pair_files import VOCABULARY_SIZE, write_tiny_bpe
from zoo.generation.samplers import BeamSampler, TopKSampler, TopPSampler
from zoo.models.causal_lm.causal_lm import CausalLM
from zoo.models.causal_lm.preprocessor import CausalLMPreprocessor
from zoo.text.byte_pair import BytePairTokenizer
from zoo.training.errors import UserError

CORPUS = ["Once upon a time there was a little cat. The cat sat on the mat."] * 32


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return BytePairTokenizer.from_folder(write_tiny_bpe(tmp_path_factory.mktemp("bpe")))


def tiny_lm(tokenizer, seed=0, **overrides):
    import keras

    keras.utils.set_random_seed(seed)
    backbone_args = dict(vocabulary_size=VOCABULARY_SIZE, max_positions=48, dropout=0.0,
                         attention_dropout=0.0, **overrides)
    lm = CausalLM.from_architecture("gpt2-tiny", **backbone_args)
    lm.preprocessor = CausalLMPreprocessor(tokenizer, sequence_length=24)
    lm.ensure_built()
    return lm


def _full_pass_greedy(lm, prompt, steps):
    ids = list(prompt)
    for _ in range(steps):
        logits = lm({"token_ids": np.array([ids]), "padding_mask": np.ones((1, len(ids)))})
        ids.append(int(np.argmax(np.asarray(ops.convert_to_numpy(logits))[0, -1])))
        if ids[-1] == lm.end_id:
            return ids[len(prompt):-1]
    return ids[len(prompt):]


@pytest.mark.slow
def test_cached_generation_equals_the_full_pass_and_ignores_the_batch(tokenizer):
    lm = tiny_lm(tokenizer)
    prompts = [[5, 9, 30, 31, 200], [7], [100, 101, 102]]
    batch = lm.generate_ids(prompts, max_new_tokens=8)
    assert batch == [_full_pass_greedy(lm, p, 8) for p in prompts]
    assert lm.generate_ids(prompts[1:2], max_new_tokens=8) == batch[1:2]
    assert lm.generate_ids(prompts, 8, sampler=BeamSampler(num_beams=1)) == batch


@pytest.mark.slow
def test_sampling_repeats_by_seed_and_streams_generates_text(tokenizer):
    lm = tiny_lm(tokenizer)
    prompts = ["Once upon", "The cat"]
    top_p = TopPSampler(p=0.9, temperature=1.5)
    first = lm.generate(prompts, max_new_tokens=12, sampler=top_p, seed=3)
    assert lm.generate(prompts, max_new_tokens=12, sampler=top_p, seed=3) == first
    others = [lm.generate(prompts, max_new_tokens=12, sampler=top_p, seed=s) for s in (4, 5)]
    assert any(o != first for o in others)
    assert lm.generate(prompts, 12, sampler=TopKSampler(k=1), seed=9) == lm.generate(prompts, 12)
    streamed = "".join(lm.stream(prompts[0], max_new_tokens=12, sampler=top_p, seed=3))
    # The stream is of one prompt: the same draws as row 0 of the batch.
    assert prompts[0] + streamed == first[0]
    assert "".join(lm.stream("The cat", max_new_tokens=12)) == lm.generate(
        ["The cat"], 12)[0][len("The cat"):]
    text = lm.generate(["The cat"], 12)[0][len("The cat"):]
    if len(text) > 2:
        stop = text[1:3]
        assert lm.generate(["The cat"], 12, stop_strings=[stop])[0] == (
            "The cat" + text[:text.find(stop) + len(stop)])


def test_bad_settings_are_one_line(tokenizer):
    lm = tiny_lm(tokenizer)
    with pytest.raises(UserError, match=r"max_new_tokens must be an integer from 1 to 4\d .*"
                                        "got 100"):
        lm.generate(["Once"], max_new_tokens=100)
    with pytest.raises(UserError, match="repetition_penalty must be a finite number > 0"):
        lm.generate(["Once"], 5, repetition_penalty=float("nan"))
    with pytest.raises(UserError, match="seed must be an integer"):
        lm.generate(["Once"], 5, sampler="top_k", seed=1.5)
    with pytest.raises(UserError, match="outside the vocabulary"):
        lm.generate_ids([[VOCABULARY_SIZE]], 5)


def test_saved_model_keeps_its_tokenizer(tokenizer, tmp_path):
    import zoo

    lm = tiny_lm(tokenizer)
    lm.save(tmp_path / "lm.keras")
    loaded = zoo.load(str(tmp_path / "lm.keras"))
    assert isinstance(loaded, CausalLM)
    assert loaded.preprocessor.tokenizer.encode(CORPUS[:1]) == tokenizer.encode(CORPUS[:1])
    assert loaded.generate(["The cat"], 8, repetition_penalty=1.5) == lm.generate(
        ["The cat"], 8, repetition_penalty=1.5)


@pytest.mark.slow
def test_fit_on_strings_learns_the_corpus_then_lora(tokenizer):
    import keras
    import tensorflow as tf

    lm = tiny_lm(tokenizer)
    lm.compile(optimizer=keras.optimizers.Adam(1e-2))
    losses = lm.fit(CORPUS, batch_size=8, epochs=20, verbose=0).history["loss"]
    assert losses[-1] < 0.3 * losses[0]
    # The corpus' style: its words only.
    words = set(CORPUS[0].replace(".", " .").split())
    after = lm.generate(["Once upon a time"], 10)[0].replace(".", " .").split()[4:]
    assert len(after) >= 4 and set(after) <= words and "cat" in after

    lm = tiny_lm(tokenizer, seed=1)
    lm.enable_lora(8, include_mlp=True)
    frozen = np.asarray(lm.backbone.token_embedding.embeddings)
    lm.compile(optimizer=keras.optimizers.Adam(3e-2))
    lora_losses = lm.fit(CORPUS, batch_size=8, epochs=8, verbose=0).history["loss"]
    assert lora_losses[-1] < 0.97 * lora_losses[0] and lora_losses == sorted(lora_losses, reverse=True)
    np.testing.assert_array_equal(np.asarray(lm.backbone.token_embedding.embeddings), frozen)
    merged = lm.merge_lora()
    assert merged.generate(["Once"], 8) == lm.generate(["Once"], 8)


def test_a_dataset_of_strings_packs_as_a_list(tokenizer):
    import tensorflow as tf

    texts = ["Once upon a time", "", "naïve café 🤗 " * 12, "The cat\nsat."]
    preprocessor = tiny_lm(tokenizer).preprocessor
    from_graph = list(preprocessor.text_dataset(tf.data.Dataset.from_tensor_slices(texts), 2))
    from_list = list(preprocessor.text_dataset(texts, 2))
    for (x1, y1, w1), (x2, y2, w2) in zip(from_graph, from_list, strict=True):
        for a, b in ((x1["token_ids"], x2["token_ids"]), (y1, y2), (w1, w2),
                     (x1["padding_mask"], x2["padding_mask"])):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    ids = tokenizer.encode(texts[:1])[0]
    np.testing.assert_array_equal(from_list[0][0]["token_ids"].numpy()[0, :len(ids) + 1],
                                  [tokenizer.end_id, *ids])


def test_the_start_token_is_read_before_each_prompt_unless_turned_off(tokenizer):
    lm, end = tiny_lm(tokenizer), tokenizer.end_id
    prompts = ["The cat sat", "Once", ""]  # an empty prompt starts from the end token
    ids = tokenizer.encode(prompts)
    read = {True: lm.generate_ids([[end] + i for i in ids], 6), False: lm.generate_ids(ids, 6)}
    assert read[True][:2] != read[False][:2]  # the start token changes what follows
    for add_start_token in (True, False):
        lm.preprocessor.add_start_token = add_start_token
        expected = [p + t for p, t in zip(prompts, tokenizer.decode(read[add_start_token]))]
        assert lm.generate(prompts, 6) == expected
        assert prompts[0] + "".join(lm.stream(prompts[0], 6)) == expected[0]
        x, labels, weights = lm.preprocessor.pack(prompts[:1])
        packed = x["token_ids"].numpy()[0].tolist()
        assert packed[:len(ids[0]) + add_start_token] == [end] * add_start_token + ids[0]
        assert labels.numpy()[0, len(ids[0]) + add_start_token - 1] == end  # learns to stop
        assert weights.numpy()[0].sum() == len(ids[0]) + add_start_token
    config = lm.preprocessor.get_config()
    assert config["add_start_token"] is False
    del config["add_start_token"]  # saved before the argument existed
    assert CausalLMPreprocessor.from_config(config).add_start_token is True
    with pytest.raises(UserError, match="^add_start_token must be True or False; got 'no'$"):
        CausalLMPreprocessor(tokenizer, add_start_token="no")
