"""MultiHeadAttention: the harness, Keras' own layer as reference, cache, fused path, pruning."""

import keras
import numpy as np
import pytest

from zoo.layers.multi_head_attention import MultiHeadAttention
from tests.layers.harness import run_layer_test

RNG = np.random.default_rng(0)
QUERY = RNG.normal(size=(2, 5, 16)).astype("float32")
VALUE = RNG.normal(size=(2, 7, 16)).astype("float32")


def _pair(**kwargs):
    """Ours and Keras' layer with the same weights."""
    ours = MultiHeadAttention(num_heads=4, key_dim=8, **kwargs)
    ref = keras.layers.MultiHeadAttention(num_heads=4, key_dim=8, **kwargs)
    ours(QUERY, VALUE)
    ref(QUERY, VALUE)
    ours.set_weights(ref.get_weights())
    return ours, ref


def test_harness_self_attention():
    run_layer_test(MultiHeadAttention, {"num_heads": 2, "key_dim": 4}, QUERY,
                   expected_output_shape=(2, 5, 16))


def test_harness_cross_attention_with_output_shape():
    run_layer_test(MultiHeadAttention, {"num_heads": 2, "key_dim": 4, "output_shape": 6},
                   [QUERY, VALUE], expected_output_shape=(2, 5, 6))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padding", [False, True])
def test_equals_keras_multi_head_attention(causal, padding):
    ours, ref = _pair()
    value = QUERY if causal else VALUE
    kwargs = {"use_causal_mask": causal}
    if padding:
        kwargs["attention_mask"] = np.ones((2, 5, value.shape[1]), bool)
        kwargs["attention_mask"][0, :, -2:] = False
    out, scores = ours(QUERY, value, return_attention_scores=True, **kwargs)
    ref_out, ref_scores = ref(QUERY, value, return_attention_scores=True, **kwargs)
    np.testing.assert_allclose(np.array(out), np.array(ref_out), atol=1e-5)
    np.testing.assert_allclose(np.array(scores), np.array(ref_scores), atol=1e-5)
    # The fused path (no scores requested) gives the same outputs.
    np.testing.assert_allclose(np.array(ours(QUERY, value, **kwargs)), np.array(ref_out),
                               atol=1e-5)


def test_keras_masking_equals_explicit_padding_mask():
    ids = np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 1]])
    embedded = keras.layers.Embedding(10, 16, mask_zero=True)
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    inputs = keras.Input((5,), dtype="int32")
    model = keras.Model(inputs, layer(embedded(inputs)))
    through_masking = np.array(model(ids))
    x = embedded(ids)
    explicit = np.array(layer(x, x, query_mask=ids != 0, value_mask=ids != 0))
    np.testing.assert_allclose(through_masking, explicit, atol=1e-6)
    plain = keras.ops.convert_to_tensor(np.array(x))  # the same values, no mask attached
    unmasked = np.array(layer(plain, plain))
    assert np.abs(through_masking[0, :3] - unmasked[0, :3]).max() > 1e-4


def test_padded_keys_get_zero_weight():
    ours, _ = _pair()
    value_mask = np.ones((2, 7), bool)
    value_mask[1, 4:] = False
    _, scores = ours(QUERY, VALUE, value_mask=value_mask, return_attention_scores=True)
    assert np.all(np.array(scores)[1, :, :, 4:] == 0.0)


def test_cached_decoding_equals_full_causal_pass():
    layer = MultiHeadAttention(num_heads=4, key_dim=4)
    full = np.array(layer(QUERY, use_causal_mask=True))
    cache = layer.empty_cache(2, 5)
    steps = []
    for i in range(5):
        out, cache = layer(QUERY[:, i:i + 1], cache=cache, cache_update_index=i)
        steps.append(np.array(out))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    # A two-token prefill then single steps gives the same too.
    cache = layer.empty_cache(2, 5)
    prefill, cache = layer(QUERY[:, :2], cache=cache, cache_update_index=0)
    np.testing.assert_allclose(np.array(prefill), full[:, :2], atol=1e-5)


def test_decoding_into_a_grown_cache_equals_the_full_causal_pass():
    """Three steps in a cache of 3, grown to 5 (`grow_cache` keeps what was written and adds
    zeros), two more steps: the full causal pass's outputs."""
    layer = MultiHeadAttention(num_heads=4, key_dim=4)
    full = np.array(layer(QUERY, use_causal_mask=True))
    cache, steps = layer.empty_cache(2, 3), []
    for i in range(5):
        if i == 3:
            written = np.array(cache[0])
            cache = layer.grow_cache(cache, 5)
            assert tuple(cache[0].shape) == (2, 4, 5, 4)
            np.testing.assert_array_equal(np.array(cache[0])[:, :, :3], written)
            assert not np.array(cache[1])[:, :, 3:].any()
        out, cache = layer(QUERY[:, i:i + 1], cache=cache, cache_update_index=i)
        steps.append(np.array(out))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)


def test_cross_attention_cache_equals_recomputation():
    layer = MultiHeadAttention(num_heads=4, key_dim=4)
    direct = np.array(layer(QUERY, VALUE))
    cache = layer.compute_cache(VALUE)
    cached, same_cache = layer(QUERY, VALUE, cache=cache)
    np.testing.assert_allclose(np.array(cached), direct, atol=1e-5)
    np.testing.assert_array_equal(np.array(same_cache), np.array(cache))


def test_cache_holds_keys_and_values_heads_first_where_written():
    """The cache's layout is public: keys and values `(batch, heads, length, head_dim)`,
    token i's projections at position i, computed here from the kernels with NumPy."""
    layer = MultiHeadAttention(num_heads=4, key_dim=4)
    layer(QUERY)
    keys, values = layer.empty_cache(2, 6)
    assert tuple(keys.shape) == tuple(values.shape) == (2, 4, 6, 4)
    cache = (keys, values)
    for i in range(3):
        _, cache = layer(QUERY[:, i:i + 1], cache=cache, cache_update_index=i)
    for buffer, dense in zip(cache, (layer.key_dense, layer.value_dense)):
        kernel, bias = (np.array(w) for w in dense.weights)
        expected = np.einsum("btc,chd->bhtd", QUERY[:, :3], kernel) + bias[None, :, None, :]
        np.testing.assert_allclose(np.array(buffer)[:, :, :3], expected, atol=1e-5)
        assert not np.array(buffer)[:, :, 3:].any()  # unwritten positions stay zero
    memory_keys, memory_values = layer.compute_cache(VALUE)
    kernel, bias = (np.array(w) for w in layer.value_dense.weights)
    np.testing.assert_allclose(
        np.array(memory_values),
        np.einsum("bsc,chd->bhsd", VALUE, kernel) + bias[None, :, None, :], atol=1e-5)
    assert tuple(memory_keys.shape) == (2, 4, 7, 4)


@pytest.mark.parametrize("cache, found", [
    (np.zeros((2, 2, 5, 4, 4), "float32"), r"an array of shape \(2, 2, 5, 4, 4\)"),
    ((np.zeros((2, 4, 5, 4), "float32"),), "a tuple of 1"),
])
def test_a_cache_that_is_not_a_keys_values_pair_is_one_line(cache, found):
    layer = MultiHeadAttention(num_heads=4, key_dim=4)
    layer(QUERY)
    with pytest.raises(ValueError, match=r"cache must be a \(keys, values\) pair.*" + found):
        layer(QUERY[:, :1], cache=cache, cache_update_index=0)


def test_fused_and_explicit_paths_agree():
    fused = MultiHeadAttention(num_heads=4, key_dim=4)
    explicit = MultiHeadAttention(num_heads=4, key_dim=4, use_fused_attention=False)
    fused(QUERY, VALUE)
    explicit(QUERY, VALUE)
    explicit.set_weights(fused.get_weights())
    mask = RNG.random((2, 5, 7)) > 0.4
    np.testing.assert_allclose(np.array(fused(QUERY, VALUE, attention_mask=mask)),
                               np.array(explicit(QUERY, VALUE, attention_mask=mask)), atol=1e-5)


def test_attention_dropout_is_active_only_in_training():
    layer = MultiHeadAttention(num_heads=2, key_dim=8, dropout=0.5)
    inference = np.array(layer(QUERY, VALUE, training=False))
    np.testing.assert_allclose(np.array(layer(QUERY, VALUE)), inference)
    keras.utils.set_random_seed(1)
    trained = np.array(layer(QUERY, VALUE, training=True))
    assert np.abs(trained - inference).max() > 1e-3


def test_pruned_heads_keep_the_others_output():
    layer = MultiHeadAttention(num_heads=4, key_dim=8)
    layer(QUERY, VALUE)
    weights = layer.get_weights()
    zeroed = [w.copy() for w in weights]
    zeroed[6][[1, 3]] = 0.0  # output kernel rows of heads 1 and 3
    layer.set_weights(zeroed)
    expected = np.array(layer(QUERY, VALUE))
    _, scores_before = layer(QUERY, VALUE, return_attention_scores=True)
    layer.set_weights(weights)
    layer = layer.pruned([3, 1])
    assert layer.num_heads == 2 and layer.get_config()["num_heads"] == 2
    assert len(layer.weights) == 8
    assert tuple(layer.query_dense.kernel.shape) == (16, 2, 8)
    out, scores_after = layer(QUERY, VALUE, return_attention_scores=True)
    np.testing.assert_allclose(np.array(out), expected, atol=1e-5)
    np.testing.assert_allclose(np.array(scores_after), np.array(scores_before)[:, [0, 2]],
                               atol=1e-6)


def test_pruned_layer_saves_and_reloads(tmp_path):
    unpruned = MultiHeadAttention(num_heads=4, key_dim=8)
    unpruned(QUERY)
    layer = unpruned.pruned([0])
    inputs = keras.Input((5, 16))
    model = keras.Model(inputs, layer(inputs))
    # Rebuild a model from the pruned layer's config and weights, as a user would.
    fresh = MultiHeadAttention.from_config(layer.get_config())
    fresh(QUERY)
    fresh.set_weights(layer.get_weights())
    np.testing.assert_allclose(np.array(fresh(QUERY)), np.array(layer(QUERY)), atol=1e-6)
    # The model holding the layer saves and loads at the pruned size.
    model.save(tmp_path / "pruned.keras")
    loaded = keras.saving.load_model(tmp_path / "pruned.keras")
    assert len(loaded.weights) == len(model.weights) == 8
    np.testing.assert_allclose(np.array(loaded(QUERY)), np.array(model(QUERY)), atol=1e-6)


def test_pruned_is_a_new_layer_and_pruning_in_steps_is_pruning_at_once():
    layer = MultiHeadAttention(num_heads=4, key_dim=8)
    layer(QUERY, VALUE)
    before = layer.get_weights()
    smaller = layer.pruned([3, 1])
    assert smaller is not layer and layer.num_heads == 4
    for now, then in zip(layer.get_weights(), before):
        np.testing.assert_array_equal(now, then)
    assert smaller.get_config() == {**layer.get_config(), "num_heads": 2}
    assert [tuple(w.shape) for w in smaller.weights] == [
        (16, 2, 8), (2, 8), (16, 2, 8), (2, 8), (16, 2, 8), (2, 8), (2, 8, 16), (16,)]
    # Heads 0 1 2 3 -> without 3: 0 1 2 -> without its second (head 1): 0 2.
    in_steps = layer.pruned([3]).pruned([1])
    assert in_steps.get_config() == smaller.get_config()
    for stepwise, new in zip(in_steps.get_weights(), smaller.get_weights()):
        np.testing.assert_array_equal(stepwise, new)
    np.testing.assert_array_equal(np.array(smaller(QUERY, VALUE)),
                                  np.array(in_steps(QUERY, VALUE)))


def test_scores_are_float32_under_mixed_float16():
    layer = MultiHeadAttention(num_heads=2, key_dim=8, dtype="mixed_float16")
    out, scores = layer(QUERY * 100.0, VALUE * 100.0, return_attention_scores=True)
    assert keras.backend.standardize_dtype(scores.dtype) == "float32"
    assert np.all(np.isfinite(np.array(scores)))
    assert keras.backend.standardize_dtype(out.dtype) == "float16"


@pytest.mark.parametrize("bad, message", [
    ({"value": np.zeros((2, 7, 9), "float32")}, "value has feature size 9"),
    ({"attention_mask": np.ones((2, 3, 7), bool)}, "does not broadcast"),
])
def test_bad_input_names_the_values(bad, message):
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    layer(QUERY, VALUE)
    kwargs = {"value": VALUE, **bad}
    with pytest.raises(ValueError, match=message):
        layer(QUERY, **kwargs)


def test_cache_index_past_the_cache_length():
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    layer(QUERY)
    cache = layer.empty_cache(2, 4)
    with pytest.raises(ValueError, match="cache_update_index 4 .* length 4"):
        layer(QUERY[:, :1], cache=cache, cache_update_index=4)


def test_pruned_heads_out_of_range():
    with pytest.raises(ValueError, match="needs a built layer"):
        MultiHeadAttention(num_heads=2, key_dim=8).pruned([0])
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    layer(QUERY)
    with pytest.raises(ValueError, match=r"heads \[5\] are out of range"):
        layer.pruned([5])
    with pytest.raises(ValueError, match="all 2 heads"):
        layer.pruned([0, 1])
    with pytest.raises(ValueError, match="all 2 heads"):
        layer.pruned([1, 0, 1])
    assert layer.num_heads == 2 and len(layer.weights) == 8


def test_a_cache_index_without_a_cache_is_refused():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    x = np.zeros((1, 3, 8), "float32")
    with pytest.raises(ValueError, match="cache_update_index needs a cache"):
        layer(x, cache_update_index=0)


def test_attend_returns_output_scores_and_cache_in_one_structure():
    layer = MultiHeadAttention(num_heads=2, key_dim=4, use_fused_attention=False)
    output, scores, cache = layer.attend(QUERY, VALUE)
    np.testing.assert_array_equal(np.array(output), np.array(layer(QUERY, VALUE)))
    assert scores is None and cache is None

    expected_output, expected_scores = layer(QUERY, VALUE, return_attention_scores=True)
    output, scores, cache = layer.attend(QUERY, VALUE, return_attention_scores=True)
    np.testing.assert_array_equal(np.array(output), np.array(expected_output))
    np.testing.assert_array_equal(np.array(scores), np.array(expected_scores))
    assert cache is None

    empty = layer.empty_cache(2, 5)
    expected_output, expected_cache = layer(QUERY[:, :1], cache=empty, cache_update_index=0)
    output, scores, cache = layer.attend(QUERY[:, :1], cache=empty, cache_update_index=0)
    np.testing.assert_array_equal(np.array(output), np.array(expected_output))
    np.testing.assert_array_equal(np.array(cache), np.array(expected_cache))
    assert scores is None

    expected = layer(QUERY[:, :1], cache=empty, cache_update_index=0,
                     return_attention_scores=True)
    found = layer.attend(QUERY[:, :1], cache=empty, cache_update_index=0,
                         return_attention_scores=True)
    assert len(expected) == len(found) == 3
    for want, got in zip(expected, found):
        np.testing.assert_array_equal(np.array(got), np.array(want))


def test_int8_quantized_projections_follow_keras():
    # The projections run as plain matrix products on the kernels, except once quantized:
    # then each runs its own call, as in Keras' layer quantized the same way.
    ours, ref = _pair()
    for layer in (ours, ref):
        for dense in (layer.query_dense, layer.key_dense, layer.value_dense,
                      layer.output_dense):
            dense.quantize("int8")
    assert ours.query_dense.kernel.dtype == "int8"
    np.testing.assert_allclose(np.array(ours(QUERY, VALUE)), np.array(ref(QUERY, VALUE)),
                               atol=1e-5)


# ---------------------------------------------------------------------- query/key norm
def _numpy_attention_with_query_key_norm(layer, query, value, epsilon=1e-6):
    """Eq. (1) with LayerNorm on each head's queries and keys (ViT-22B), in float64 NumPy
    from the layer's weights."""
    w = {v.path.split("/", 1)[1]: np.asarray(v, "float64") for v in layer.weights}

    def project(x, name):
        return np.einsum("btd,dhk->bthk", x, w[f"{name}/kernel"]) + w[f"{name}/bias"]

    def norm(x, name):
        mean = x.mean(-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(variance + epsilon) * w[f"{name}/gamma"] + w[f"{name}/beta"]

    q = norm(project(query, "query"), "query_norm")
    k = norm(project(value, "key"), "key_norm")
    v = project(value, "value")
    logits = np.einsum("bthk,bshk->bhts", q, k) / np.sqrt(q.shape[-1])
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    context = np.einsum("bhts,bshk->bthk", weights, v)
    return (np.einsum("bthk,hkd->btd", context, w["attention_output/kernel"])
            + w["attention_output/bias"])


def test_query_key_norm_equals_layer_norm_of_queries_and_keys_in_numpy():
    layer = MultiHeadAttention(num_heads=4, key_dim=8, query_key_norm=True)
    layer(QUERY, VALUE)
    rng = np.random.default_rng(3)
    layer.set_weights([rng.normal(size=w.shape).astype("float32") * 0.3
                       for w in layer.get_weights()])
    assert len(layer.weights) == 12  # 4 projections x 2, and gamma, beta of both norms
    np.testing.assert_allclose(
        np.array(layer(QUERY, VALUE)),
        _numpy_attention_with_query_key_norm(layer, QUERY.astype("float64"),
                                             VALUE.astype("float64")), atol=1e-4)


def test_query_key_norm_bounds_the_attention_logits():
    """Whatever the scale of the projections, normalised queries and keys keep every logit
    within sqrt(key_dim) * |gamma_q| * |gamma_k| of zero (Cauchy-Schwarz): no one-hot
    softmax from growing kernels."""
    layer = MultiHeadAttention(num_heads=2, key_dim=8, query_key_norm=True)
    layer(QUERY)
    layer.query_dense.kernel.assign(np.asarray(layer.query_dense.kernel) * 1000.0)
    layer.key_dense.kernel.assign(np.asarray(layer.key_dense.kernel) * 1000.0)
    _, scores = layer(QUERY, return_attention_scores=True)
    assert float(np.array(scores).max()) < 0.9  # softmax over 5 keys stays spread


def test_query_key_norm_harness_cache_and_pruning():
    run_layer_test(MultiHeadAttention, {"num_heads": 2, "key_dim": 4, "query_key_norm": True},
                   QUERY, expected_num_trainable_weights=12)
    layer = MultiHeadAttention(num_heads=4, key_dim=4, query_key_norm=True)
    full = np.array(layer(QUERY, use_causal_mask=True))
    cache, steps = layer.empty_cache(2, 5), []
    for i in range(5):
        out, cache = layer(QUERY[:, i:i + 1], cache=cache, cache_update_index=i)
        steps.append(np.array(out))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    direct = np.array(layer(QUERY, VALUE))
    cached, _ = layer(QUERY, VALUE, cache=layer.compute_cache(VALUE))
    np.testing.assert_allclose(np.array(cached), direct, atol=1e-5)
    smaller = layer.pruned([0])
    assert smaller.query_key_norm and len(smaller.weights) == 12
