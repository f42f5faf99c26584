"""A causal language model's SavedModel as the model server runs it (XLA off, a fresh process
importing only TensorFlow and TF Text, a TF1 session, the warm-up replayed, left-out inputs
from the signature's defaults): served greedy completions equal `CausalLM.generate`'s, alone
and beside other prompts, both reading the start token before each prompt; a seeded draw
repeats; a request past a cap is refused naming it."""

import keras
import pytest

from tests.zoo.conftest import serve
from tests.zoo.serving.conftest import check_request_table
from tests.zoo.text._byte_pair_files import VOCABULARY_SIZE, write_tiny_bpe
from zoo.serving.generation_endpoints import MAX_PROMPTS, new_token_cap, prompt_token_cap

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="export runs on the TensorFlow backend")
POSITIONS = 48


def _exported(tmp_path_factory, name, quantized=False):
    """A tiny GPT-2 (weights from seed 3), int8 if `quantized`, and its export's version
    folder."""
    from zoo.models.causal_lm.causal_lm import CausalLM
    from zoo.models.causal_lm.preprocessor import CausalLMPreprocessor
    from zoo.models.quantization import quantize_model
    from zoo.serving.export import export_model
    from zoo.serving.model_server import xla_only_op_types
    from zoo.text.byte_pair import BytePairTokenizer

    keras.utils.set_random_seed(3)
    tokenizer = BytePairTokenizer.from_folder(write_tiny_bpe(tmp_path_factory.mktemp("bpe")))
    lm = CausalLM.from_architecture("gpt2-tiny", vocabulary_size=VOCABULARY_SIZE,
                                    max_positions=POSITIONS, dropout=0.0,
                                    attention_dropout=0.0)
    lm.preprocessor = CausalLMPreprocessor(tokenizer, sequence_length=24)
    lm.ensure_built()
    if quantized:
        quantize_model(lm)
    version = export_model(lm, tmp_path_factory.mktemp("serving"), name=name)
    assert not xla_only_op_types(version)
    return lm, version


@pytest.fixture(scope="module")
def exported_lm(tmp_path_factory):
    return _exported(tmp_path_factory, "lm")


@pytest.mark.slow
def test_served_greedy_equals_generate_alone_and_in_a_batch_and_seeds_repeat(exported_lm):
    lm, version = exported_lm
    prompts = ["The cat sat", "Once upon a time there was a little", "a", ""]
    expected = lm.generate(prompts, max_new_tokens=7, sampler="greedy")
    # Alone, max_new_tokens left to its default (the positions a longest prompt leaves).
    alone = serve(version, {"prompts": prompts[1:2]})
    assert alone["completions"] == lm.generate(prompts[1:2], max_new_tokens=new_token_cap(
        POSITIONS), sampler="greedy")
    batch = serve(version, {"prompts": prompts, "max_new_tokens": 7})
    assert batch["completions"] == expected
    # The test can fail: the continuations are not empty and not all alike, and the start
    # token that both sides read before each prompt changes some of them.
    assert all(n > 0 for n in batch["new_tokens"][:3]) and len(set(expected)) == 4
    tokenizer = lm.preprocessor.tokenizer
    assert expected[:3] != [p + text for p, text in zip(prompts, tokenizer.decode(
        lm.generate_ids(tokenizer.encode(prompts[:3]), max_new_tokens=7)))]
    sampled = {"prompts": prompts, "temperature": 1.5, "top_p": 0.95, "seed": 11,
               "max_new_tokens": 7}
    first, again = serve(version, sampled), serve(version, sampled)
    assert first["completions"] == again["completions"] != expected


@pytest.mark.slow
def test_requests_past_a_cap_are_refused_naming_it(exported_lm):
    _, version = exported_lm
    # The prompt's text, its start token not counted.
    tokens, new = prompt_token_cap(POSITIONS, add_start_token=True), new_token_cap(POSITIONS)
    long_prompt = "np.array([b' a' * %d], dtype=object)" % (tokens + 1)
    check_request_table(version, [
        ("at the caps", "serving_default",
         {"prompts": f"np.array([b' a' * {tokens}] * {MAX_PROMPTS}, dtype=object)",
          "max_new_tokens": f"np.int32({new})"},
         {"completions": [MAX_PROMPTS], "new_tokens": [MAX_PROMPTS]}),
        ("empty request", "serving_default", {"prompts": "np.array([], dtype=object)"},
         {"completions": [0], "new_tokens": [0]}),
        ("too many prompts", "serving_default",
         {"prompts": f"np.array([b'a'] * {MAX_PROMPTS + 1}, dtype=object)"},
         f"[prompts is more than the limit of] [{MAX_PROMPTS}]"),
        ("a prompt too long", "serving_default", {"prompts": long_prompt},
         f"[tokens is longer than the limit of] [{tokens}]"),
        ("too many new tokens", "serving_default",
         {"prompts": "np.array([b'a'], dtype=object)", "max_new_tokens": f"np.int32({new + 1})"},
         f"[max_new_tokens must be from 1 to] [{new}]"),
        ("a bad top_p", "serving_default",
         {"prompts": "np.array([b'a'], dtype=object)", "top_p": "np.float32(0)"},
         "[top_p must be in (0, 1]; got]"),
    ])


@pytest.mark.slow
def test_an_int8_export_serves_what_the_int8_model_generates(tmp_path_factory):
    import numpy as np

    lm, version = _exported(tmp_path_factory, "lm-int8", quantized=True)
    prompts = ["The cat sat", "Once upon a time there was a little", ""]
    served = serve(version, {"prompts": prompts, "max_new_tokens": 7})
    assert served["completions"] == lm.generate(prompts, max_new_tokens=7)
    assert all(n > 0 for n in served["new_tokens"][:2])
    import tensorflow as tf

    stored = tf.train.load_checkpoint(str(version / "variables" / "variables"))
    shapes, dtypes = stored.get_variable_to_shape_map(), stored.get_variable_to_dtype_map()
    weights = [name for name, dtype in dtypes.items() if dtype in (tf.int8, tf.float32)]
    # 2 blocks x 6 projections, and the token table (the largest weight: the tied head).
    assert sum(dtypes[name] == tf.int8 for name in weights) == 2 * 6 + 1
    assert dtypes[max(weights, key=lambda name: np.prod(shapes[name]))] == tf.int8
