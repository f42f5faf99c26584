"""LoRA: which weights train and how many, outputs before and after training, merging,
saving and loading, and bad values."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import zoo
from zoo.models.lora import effective_kernel, enable_lora, lora_layers, merge_lora
from zoo.models.translator.model import Translator
from zoo.models.vit.model import VisionTransformer
from zoo.training.optimizers import relative_variable_path

# D = 16, H = 4 heads of K = 4, F = 32, C = 5 classes, L = 2 blocks.
VIT = dict(image_size=16, patch_size=4, num_classes=5, hidden_dim=16, num_layers=2,
           num_heads=4, intermediate_dim=32, head_initializer="glorot_uniform")
TRANSLATOR = dict(vocabulary_size=40, hidden_dim=16, num_encoder_layers=1,
                  num_decoder_layers=2, num_heads=4, intermediate_dim=32, dropout=0.0,
                  max_source_length=12, max_target_length=12)


def vit(**overrides) -> VisionTransformer:
    keras.utils.set_random_seed(0)
    return VisionTransformer(**{**VIT, **overrides})


def translator() -> Translator:
    keras.utils.set_random_seed(0)
    model = Translator(**TRANSLATOR)
    model.ensure_built()
    return model


def images(n: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 16, 16, 3)).astype("uint8")


def token_batch(n: int = 4) -> dict[str, np.ndarray]:
    ids = np.random.default_rng(1).integers(4, 40, (n, 7)).astype("int32")
    return {"source_ids": ids, "target_ids": np.concatenate([np.full((n, 1), 2), ids[:, :-1]],
                                                            axis=1).astype("int32")}


def values(model: keras.Model) -> dict[str, np.ndarray]:
    return {relative_variable_path(v): np.array(v.numpy()) for v in model.weights}


def is_factor(path: str) -> bool:
    return path.endswith(("/lora_kernel_a", "/lora_kernel_b"))


def train_a_few_steps(model: VisionTransformer, steps: int = 3) -> None:
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(images(), np.arange(8) % 5, batch_size=8, epochs=steps, verbose=0)


def trained_vit(**lora) -> VisionTransformer:
    model = vit().enable_lora(3, **lora)
    train_a_few_steps(model)
    return model


# ------------------------------------------------------------------ what trains
def expected_vit_count(rank: int, targets: tuple[str, ...], include_mlp: bool) -> int:
    """From the architecture alone: LoRA on a kernel of shape (..., out) trains A of shape
    (..., r) and B (r, out) (Keras factors it along its last axis), so r * (in + out) with
    in the product of the other axes; plus the head."""
    d, heads, k, f, c, blocks = 16, 4, 4, 32, 5, 2
    per_projection = {"query": d * heads + k, "key": d * heads + k, "value": d * heads + k,
                      "output": heads * k + d}  # kernels (d, heads, k) and (heads, k, d)
    per_block = sum(rank * per_projection[t] for t in targets)
    if include_mlp:
        per_block += rank * (d + f) + rank * (f + d)  # Dense (d, f), then (f, d)
    return blocks * per_block + d * c + c


@pytest.mark.parametrize("rank, targets, include_mlp", [
    (4, ("query", "value"), False),
    (2, ("query", "key", "value", "output"), False),
    (3, ("value",), True),
])
def test_a_lora_vit_trains_exactly_the_factors_and_the_head(rank, targets, include_mlp):
    model = vit()
    total = model.count_params()
    enable_lora(model, rank, targets=targets, include_mlp=include_mlp)
    trainable = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    assert trainable == expected_vit_count(rank, targets, include_mlp)
    assert model.count_params() == total + trainable - (16 * 5 + 5)
    names = {relative_variable_path(v) for v in model.trainable_weights}
    assert {n for n in names if not is_factor(n)} == {"head/kernel", "head/bias"}
    assert len(lora_layers(model)) == 2 * (len(targets) + 2 * include_mlp)


def test_a_lora_translator_trains_the_factors_alone():
    model = translator()
    model.enable_lora(4)
    # Self-attention in 1 encoder block, self- and cross-attention in 2 decoder blocks;
    # query and value kernels (16, 4, 4) each: 4 * (16 * 4 + 4).
    assert sum(int(np.prod(v.shape)) for v in model.trainable_weights) == 5 * 2 * 4 * (64 + 4)
    assert all(is_factor(relative_variable_path(v)) for v in model.trainable_weights)


def test_frozen_blocks_get_trainable_factors_too():
    model = vit().freeze_blocks(2)  # every block frozen: LoRA must still train its factors
    model.enable_lora(4)
    assert sum(int(np.prod(v.shape)) for v in model.trainable_weights) == expected_vit_count(
        4, ("query", "value"), False)


# ------------------------------------------------------------------ outputs and training
def test_a_new_lora_model_computes_what_the_model_did():
    model = vit()
    before = np.asarray(model(images()))
    model.enable_lora(4, alpha=16)
    np.testing.assert_array_equal(np.asarray(model(images())), before)  # B starts at zero
    seq = translator()
    before = np.asarray(seq(token_batch()))
    seq.enable_lora(2, targets=("query", "key", "value", "output"), include_mlp=True)
    np.testing.assert_array_equal(np.asarray(seq(token_batch())), before)


@pytest.mark.parametrize("stem", [None, [8]], ids=["plain", "hybrid"])
def test_training_moves_the_factors_and_the_head_and_nothing_else(stem):
    model = vit(stem_filters=stem)  # the hybrid's stem has a batch norm and its statistics
    model.enable_lora(3)
    before = values(model)
    train_a_few_steps(model)
    after = values(model)
    for path in before:
        moved = not np.array_equal(before[path], after[path])
        assert moved == (is_factor(path) or path.startswith("head/")), path


# ------------------------------------------------------------------ merging, saving
def test_merging_folds_the_factors_into_the_kernels(tmp_path):
    model = trained_vit(alpha=6.0)  # a scale of 6 / 3 = 2
    outputs = np.asarray(model(images()))
    merged = merge_lora(model)
    assert type(merged) is VisionTransformer and lora_layers(merged) == []
    assert not any("lora" in v.path for v in merged.weights)
    assert len(merged.trainable_weights) == len(merged.weights) == len(vit().weights)
    assert "lora" not in str(merged.get_config())
    np.testing.assert_allclose(np.asarray(merged(images())), outputs, atol=1e-5)
    # W + (alpha / r) A B, as Keras' kernel property computes it.
    query = model.encoder_blocks[1].self_attention.query_dense
    kernel, a, b = (np.asarray(v.numpy()) for v in (query.weights[0], query.lora_kernel_a,
                                                    query.lora_kernel_b))
    got = np.asarray(merged.encoder_blocks[1].self_attention.query_dense.kernel)
    np.testing.assert_array_equal(got, np.asarray(query.kernel))
    np.testing.assert_array_equal(got, np.asarray(effective_kernel(query)))
    np.testing.assert_allclose(got, kernel + 2.0 * np.einsum("dhr,rk->dhk", a, b), atol=1e-6)
    assert np.abs(got - kernel).max() > 1e-3
    assert len(lora_layers(model)) == 4  # the adapted model is left as it was

    merged.save(tmp_path / "merged.keras")
    loaded = zoo.load(str(tmp_path / "merged.keras"))
    assert not any("lora" in v.path for v in loaded.weights)
    np.testing.assert_allclose(np.asarray(loaded(images())), outputs, atol=1e-5)


def test_saving_an_unmerged_model_writes_the_merged_one(tmp_path):
    """The decision for `model.save` before `merge_lora`: Keras' Dense and EinsumDense save
    their kernel with the factors added and not the factors, and no config names LoRA."""
    model = trained_vit(include_mlp=True)
    model.save(tmp_path / "unmerged.keras")
    loaded = zoo.load(str(tmp_path / "unmerged.keras"))
    assert lora_layers(loaded) == [] and len(loaded.weights) == len(vit().weights)
    np.testing.assert_allclose(np.asarray(loaded(images())), np.asarray(model(images())),
                               atol=1e-5)


def adapted_translator() -> Translator:
    model = translator().enable_lora(4, alpha=32.0)
    for layer in lora_layers(model):  # as if trained: factors that change the outputs
        b = layer.lora_kernel_b
        b.assign(np.random.default_rng(2).normal(0, 0.5, tuple(b.shape)).astype("float32"))
    return model


def test_a_merged_translator_computes_as_the_adapted_one():
    model = adapted_translator()
    merged = model.merge_lora()
    assert type(merged) is Translator and lora_layers(merged) == []
    assert merged.tokenizer is model.tokenizer
    batch = token_batch()
    outputs = np.asarray(model(batch))
    assert np.abs(outputs - np.asarray(translator()(batch))).max() > 1e-2
    np.testing.assert_allclose(np.asarray(merged(batch)), outputs, atol=1e-5)


@pytest.mark.slow  # three compiled searches
def test_a_search_compiled_before_lora_sees_the_factors_after():
    model = translator()
    ids = token_batch(2)["source_ids"]
    base_tokens, _ = model.search(ids, beam_size=1, max_length=8)
    adapted = adapted_translator()
    model.enable_lora(4, alpha=32.0)
    model.set_weights(adapted.get_weights())
    tokens, scores = model.search(ids, beam_size=1, max_length=8)
    assert not np.array_equal(tokens, base_tokens)
    merged_tokens, merged_scores = model.merge_lora().search(ids, beam_size=1, max_length=8)
    np.testing.assert_array_equal(merged_tokens, tokens)
    np.testing.assert_allclose(merged_scores, scores, atol=1e-4)


# ------------------------------------------------------------------ bad values
@pytest.mark.parametrize("rank", [0, -1, 2.5, True, "4", None])
def test_a_rank_that_is_not_a_positive_int_is_one_line(rank):
    model = vit()
    with pytest.raises(zoo.UserError, match="LoRA rank must be a positive int; got") as error:
        model.enable_lora(rank)
    assert "\n" not in str(error.value) and lora_layers(model) == []


@pytest.mark.parametrize("arguments, message", [
    (dict(alpha=0), "LoRA alpha must be a positive number up to 10000 or None; got 0"),
    (dict(alpha=True), "LoRA alpha must be a positive number up to 10000 or None; got True"),
    (dict(targets=("query", "keys")), "LoRA targets must be some of query, key, value, "
                                      "output; got"),
    (dict(targets=()), "LoRA targets must be some of"),
])
def test_bad_alphas_and_targets_are_one_line(arguments, message):
    with pytest.raises(zoo.UserError, match=message) as error:
        enable_lora(vit(), 4, **arguments)
    assert "\n" not in str(error.value)


def test_lora_on_another_model_twice_or_merging_none_is_one_line():
    dense = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    for call in (lambda: enable_lora(dense, 4), lambda: merge_lora(dense)):
        with pytest.raises(zoo.UserError, match="LoRA adapts a VisionTransformer or a "
                                                "Translator; got Sequential"):
            call()
    model = vit().enable_lora(2)
    with pytest.raises(zoo.UserError, match="LoRA is already enabled on this "
                                            "VisionTransformer; merge_lora"):
        model.enable_lora(2)
    with pytest.raises(zoo.UserError, match="has no LoRA factors to merge"):
        vit().merge_lora()


@pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize` method")
def test_a_quantized_model_is_refused_in_one_line():
    model = vit()
    model.quantize("int8")
    with pytest.raises(zoo.UserError, match="query is quantized \\(int8\\): adapt the model "
                                            "before quantizing it") as error:
        model.enable_lora(2)
    assert "\n" not in str(error.value) and lora_layers(model) == []
