"""int8 models (`zoo.models.quantization`): outputs near the float model's, save and load
round trips on the backend in use (run this file with KERAS_BACKEND=jax too), sizes, and
bad input as one line."""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest

import zoo
from zoo.layers.int8_route import RoutedInputQuantizer
from zoo.models.quantization import (CPU_FEATURES, cpu_features, int8_speed_note,
                                     quantization_mode, quantize_model, quantized_layers,
                                     route_int8_layers)
from zoo.models.causal_lm.backbone import GPT2Backbone
from zoo.models.causal_lm.causal_lm import CausalLM
from zoo.models.sentence_encoder.model import SentenceEncoder
from zoo.models.translator.model import Translator
from zoo.models.vit.model import VisionTransformer

# Wide enough that the kernels, not the scales and the float norms, fill the file.
VIT = dict(image_size=16, patch_size=4, num_classes=10, hidden_dim=64, num_layers=2,
           num_heads=4, intermediate_dim=128, head_initializer="glorot_uniform", dropout=0.0)
TRANSLATOR = dict(vocabulary_size=300, hidden_dim=64, num_encoder_layers=2,
                  num_decoder_layers=2, num_heads=4, intermediate_dim=128, dropout=0.0,
                  max_source_length=12, max_target_length=12)
ENCODER = dict(vocabulary_size=300, num_layers=2, num_heads=4, hidden_dim=64,
               intermediate_dim=128, max_positions=16)
LM = dict(ENCODER, dropout=0.0, attention_dropout=0.0)


def vit(**overrides) -> VisionTransformer:
    keras.utils.set_random_seed(0)
    model = VisionTransformer(**{**VIT, **overrides})
    model(np.zeros((1, 16, 16, 3), "uint8"))
    return model


def translator(**overrides) -> Translator:
    keras.utils.set_random_seed(0)
    model = Translator(**{**TRANSLATOR, **overrides})
    model.ensure_built()
    return model


def encoder() -> SentenceEncoder:
    keras.utils.set_random_seed(0)
    return SentenceEncoder(**ENCODER)  # built by its constructor


def causal_lm() -> CausalLM:
    keras.utils.set_random_seed(0)
    model = CausalLM(GPT2Backbone(**LM))
    model.ensure_built()
    return model


def images(n: int = 16) -> np.ndarray:
    return np.random.default_rng(1).integers(0, 256, (n, 16, 16, 3)).astype("uint8")


def pair(n: int = 8, length: int = 10) -> dict:
    rng = np.random.default_rng(2)
    return {"source_ids": rng.integers(4, 300, (n, length)).astype("int32"),
            "target_ids": rng.integers(4, 300, (n, length)).astype("int32")}


def encoder_inputs(n: int = 8, length: int = 10) -> dict:
    rng = np.random.default_rng(3)
    return {"token_ids": rng.integers(1, 300, (n, length)).astype("int32"),
            "padding_mask": np.ones((n, length), "int32")}


def _run(model: keras.Model) -> np.ndarray:
    if isinstance(model, VisionTransformer):
        return np.asarray(model(images()))
    if isinstance(model, Translator):
        return np.asarray(model(pair()))
    return np.asarray(model(encoder_inputs()))  # a sentence encoder's, a causal LM's


# ---------------------------------------------------------------------- numbers
def test_every_projection_and_the_tied_embedding_hold_int8():
    model = quantize_model(translator())
    kinds = {type(layer).__name__ for layer in quantized_layers(model)}
    assert kinds == {"Dense", "EinsumDense", "TokenEmbedding"}
    # 2 blocks x (4 + 2) + 2 blocks x (4 + 4 + 2) projections and the embedding.
    assert len(quantized_layers(model)) == 12 + 20 + 1
    assert quantization_mode(model) == "int8"
    assert model.embedding.embeddings.dtype == "int8"
    routed = [layer for layer in quantized_layers(model)
              if isinstance(getattr(layer, "inputs_quantizer", None), RoutedInputQuantizer)]
    assert len(routed) == 12 + 20  # every Dense and EinsumDense; the embedding asks itself


@pytest.mark.parametrize("build, tolerance", [("vit", 0.03), ("translator", 0.05),
                                              ("causal_lm", 0.03)])
def test_logits_stay_near_the_float_model_and_keep_the_ranking(build, tolerance):
    # Weights and each input row are rounded to 1/254 of their largest magnitude (per
    # channel, per row); through two blocks that moves a logit by a few hundredths of the
    # logits' spread, and the top class (the next token) rarely changes.
    model = {"vit": vit, "translator": translator, "causal_lm": causal_lm}[build]()
    expected = _run(model)
    found = _run(quantize_model(model))
    spread = expected.max() - expected.min()
    assert np.abs(found - expected).max() < tolerance * spread
    assert (found.argmax(-1) == expected.argmax(-1)).mean() >= 0.9


def test_sentence_embeddings_stay_near_the_float_model():
    model = encoder()
    expected = _run(model)
    found = _run(quantize_model(model))
    cosine = (expected * found).sum(-1)  # both unit vectors
    assert cosine.min() > 0.99


@pytest.mark.slow
def test_greedy_search_after_quantizing_uses_the_int8_weights():
    # A compiled search captured the float weights; quantizing drops it.
    model = translator()
    source = pair()["source_ids"][:2]
    float_tokens, _ = model.search(source, beam_size=1, max_length=8)
    quantize_model(model)
    tokens, _ = model.search(source, beam_size=1, max_length=8)
    step_logits = np.asarray(model.decode(tokens[:, :1] * 0 + model.special_ids()[0],
                                          *model.encode(source)))
    assert (tokens[:, 0] == step_logits[:, 0].argmax(-1)).all()
    assert float_tokens.shape == tokens.shape


def test_int8_greedy_generation_follows_the_float_one_where_the_margin_allows():
    # GPT-2's head is its token table: the int8 table and its per-token scales give the
    # logits. A compiled generation captured the float weights; quantizing drops it.
    lm = causal_lm()
    prompt = [5, 9, 30]
    float_new = lm.generate_ids([prompt], max_new_tokens=6)[0]
    sequence = {"token_ids": np.array([prompt + float_new]),
                "padding_mask": np.ones((1, len(prompt) + len(float_new)))}
    float_logits = np.asarray(lm(sequence))[0, len(prompt) - 1:-1]  # those that chose them
    quantize_model(lm)
    assert lm.backbone.token_embedding.embeddings.dtype == "int8"
    error = np.abs(np.asarray(lm(sequence))[0, len(prompt) - 1:-1] - float_logits).max()
    assert error < 0.03 * (float_logits.max() - float_logits.min())  # as the test above
    # A step whose float top-two margin exceeds twice the largest logit change keeps its
    # argmax: the int8 search writes the float one's tokens up to the first closer step.
    top_two = np.sort(float_logits, axis=-1)[:, -2:]
    wide = top_two[:, 1] - top_two[:, 0] > 2 * error
    safe = int(np.argmin(wide)) if not wide.all() else len(wide)
    assert safe >= 3, (top_two, error)
    int8_new = lm.generate_ids([prompt], max_new_tokens=6)[0]
    assert int8_new[:safe] == float_new[:safe]
    # and it is the int8 model's own greedy search, whatever came after.
    ids = prompt + int8_new
    steps = np.asarray(lm({"token_ids": np.array([ids]), "padding_mask": np.ones((1, len(ids)))}))
    assert steps[0, len(prompt) - 1:-1].argmax(-1).tolist() == int8_new[:len(ids) - len(prompt)]


# ---------------------------------------------------------------------- save and load
@pytest.mark.parametrize("build", [translator, vit, encoder, causal_lm],
                         ids=["translator", "vit", "sentence-encoder", "causal-lm"])
def test_a_saved_int8_model_loads_with_the_same_outputs_and_saves_again(build, tmp_path):
    model = quantize_model(build())
    expected = _run(model)
    model.save(tmp_path / "int8.keras")
    loaded = zoo.load(str(tmp_path / "int8.keras"))
    assert quantization_mode(loaded) == "int8"
    np.testing.assert_array_equal(_run(loaded), expected)
    loaded.save(tmp_path / "again.keras")  # Keras' layers save their scales again
    np.testing.assert_array_equal(_run(zoo.load(str(tmp_path / "again.keras"))), expected)


def test_keras_own_loader_reads_an_int8_file(tmp_path):
    model = quantize_model(vit())
    model.save(tmp_path / "int8.keras")
    loaded = keras.saving.load_model(tmp_path / "int8.keras")
    # Keras' loader leaves its layers on Keras' own int8 route; zoo.load routes them.
    assert not any(isinstance(layer.inputs_quantizer, RoutedInputQuantizer)
                   for layer in quantized_layers(loaded) if hasattr(layer, "inputs_quantizer"))
    np.testing.assert_allclose(_run(loaded), _run(model), atol=0.1)
    assert route_int8_layers(loaded) == len(quantized_layers(loaded))
    np.testing.assert_array_equal(_run(loaded), _run(model))


def test_a_float_model_saves_as_before(tmp_path):
    model = vit()
    model.save(tmp_path / "float.keras")
    assert not isinstance(model.dtype_policy, keras.dtype_policies.DTypePolicyMap)
    assert quantization_mode(zoo.load(str(tmp_path / "float.keras"))) is None


@pytest.mark.parametrize("build", [lambda: translator(vocabulary_size=1000, hidden_dim=128,
                                                       intermediate_dim=512),
                                   lambda: vit(hidden_dim=128, intermediate_dim=512)],
                         ids=["translator", "vit"])
def test_the_int8_file_is_at_most_035_of_the_float_file(build, tmp_path):
    # Each stored variable costs about a kilobyte of HDF5 bookkeeping, whatever its size:
    # the translator here is wide enough that its weights dominate, as in the shipped ones.
    model = build()
    model.save(tmp_path / "float.keras")
    quantize_model(model).save(tmp_path / "int8.keras")
    ratio = os.path.getsize(tmp_path / "int8.keras") / os.path.getsize(tmp_path / "float.keras")
    assert ratio <= 0.35


# 2 blocks x 6 projections; the causal LM's token table (its head) too.
@pytest.mark.parametrize("build, count", [(vit, 12), (causal_lm, 13)], ids=["vit", "causal-lm"])
def test_a_loaded_float_model_quantizes_and_round_trips(build, count, tmp_path):
    # A loaded causal LM's backbone has a policy object of its own, not the model's.
    build().save(tmp_path / "float.keras")
    model = quantize_model(zoo.load(str(tmp_path / "float.keras")))
    assert len(quantized_layers(model)) == count
    model.save(tmp_path / "int8.keras")
    np.testing.assert_array_equal(_run(zoo.load(str(tmp_path / "int8.keras"))), _run(model))


def test_an_int8_captioner_stays_near_the_float_one_and_round_trips(tmp_path):
    from tests.zoo.models._tiny_captioner import caption_images, tiny_captioner

    model = tiny_captioner(tmp_path / "bpe", seed=0)
    inputs = {"images": caption_images(2), "token_ids": np.array([[model.end_id, 5, 6]] * 2),
              "padding_mask": np.ones((2, 3))}
    expected = np.asarray(model(inputs))
    quantize_model(model)
    # Both towers, the projection between them, and the decoder's tied token table.
    assert {type(layer).__name__ for layer in quantized_layers(model)} == {
        "Dense", "EinsumDense", "TokenEmbedding"}
    found = np.asarray(model(inputs))
    assert np.abs(found - expected).max() < 0.03 * (expected.max() - expected.min())
    assert (found.argmax(-1) == expected.argmax(-1)).all()
    model.save(tmp_path / "int8.keras")
    loaded = zoo.load(str(tmp_path / "int8.keras"))
    assert quantization_mode(loaded) == "int8"
    np.testing.assert_array_equal(np.asarray(loaded(inputs)), found)


def test_an_int8_clip_embeds_near_the_float_one_and_round_trips(tmp_path):
    from zoo.models.clip.model import CLIP

    keras.utils.set_random_seed(0)
    clip = CLIP.from_architecture("clip-tiny")
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (3, 32, 32, 3)).astype("uint8")
    ids = rng.integers(0, 500, (3, 12)).astype("int32")

    def embeddings(model):
        found = [np.asarray(model.encode_images(pixels)),
                 np.asarray(model.backbone.encode_texts(ids))]
        return [e / np.linalg.norm(e, axis=-1, keepdims=True) for e in found]

    expected = embeddings(clip)
    quantize_model(clip)
    found = embeddings(clip)
    for before, after in zip(expected, found):  # images, texts
        assert (before * after).sum(-1).min() > 0.99
    clip.save(tmp_path / "int8.keras")
    loaded = zoo.load(str(tmp_path / "int8.keras"))
    assert quantization_mode(loaded) == "int8"
    for after, again in zip(found, embeddings(loaded)):
        np.testing.assert_array_equal(again, after)


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize("mode", ["int4", "INT8", None, 8])
def test_an_unknown_mode_is_one_line(mode):
    with pytest.raises(zoo.UserError, match="quantization mode must be one of int8; got") as e:
        quantize_model(vit(), mode)
    assert "\n" not in str(e.value) and repr(mode) in str(e.value)


def test_another_kind_of_model_is_one_line():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(zoo.UserError, match="got a Sequential$"):
        quantize_model(model)


def test_quantizing_twice_is_one_line():
    model = quantize_model(vit())
    with pytest.raises(zoo.UserError, match="already quantized \\(int8\\)") as error:
        quantize_model(model)
    assert "\n" not in str(error.value)


def test_lora_factors_must_be_merged_first():
    model = vit()
    model.enable_lora(2)
    with pytest.raises(zoo.UserError, match="has LoRA factors .*merge_lora"):
        quantize_model(model)


def test_a_float16_model_is_refused_in_one_line():
    keras.utils.set_random_seed(0)
    model = VisionTransformer(**VIT, dtype="mixed_float16")
    with pytest.raises(zoo.UserError, match="computes in float16 \\(mixed_float16\\)"):
        quantize_model(model)


@pytest.mark.parametrize("flags, expected", [
    ("fpu sse avx2 fma", ["avx2"]),
    ("avx2 avx512f avx512_vnni amx_bf16 amx_int8 amx_tile", ["avx2", "avx512f", "avx512_vnni",
                                                          "amx_int8", "amx_bf16"]),
    ("fp asimd sve", []),  # an Arm CPU names none of them
])
def test_cpu_features_reads_the_flags_line(flags, expected):
    cpuinfo = f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: {flags}\n"
    assert cpu_features(cpuinfo) == expected
    assert cpu_features("model name : no flags line") == []


def test_the_speed_note_names_the_cpu_s_features_or_says_it_has_none():
    assert int8_speed_note(["avx2", "avx512_vnni"]).startswith(
        "int8 buys size, not speed, on this CPU (avx2, avx512_vnni): ")
    none = int8_speed_note([])
    assert "\n" not in none and all(flag in none for flag in CPU_FEATURES)
