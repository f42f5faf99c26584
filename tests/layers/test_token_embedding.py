"""TokenEmbedding: scaled lookup, tied output projection and padding mask (paper, 3.4)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

from zoo.layers.token_embedding import TokenEmbedding
from tests.layers.harness import run_layer_test

VOCAB, DIM = 11, 16


def built_layer(**kwargs) -> tuple[TokenEmbedding, np.ndarray]:
    """A layer whose matrix is a known random one."""
    layer = TokenEmbedding(VOCAB, DIM, **kwargs)
    layer.build()
    table = np.random.default_rng(0).normal(size=(VOCAB, DIM)).astype("float32")
    layer.set_weights([table])
    return layer, table


def test_harness_embedding():
    ids = np.random.default_rng(0).integers(0, VOCAB, size=(2, 5)).astype("int32")
    run_layer_test(TokenEmbedding, {"vocabulary_size": VOCAB, "embedding_dim": DIM}, ids,
                   expected_output_shape=(2, 5, DIM))


def test_harness_unscaled_without_mask():
    ids = np.random.default_rng(0).integers(1, VOCAB, size=(3, 4)).astype("int32")
    run_layer_test(
        TokenEmbedding,
        {"vocabulary_size": VOCAB, "embedding_dim": 8, "scale": False, "mask_zero": False,
         "embeddings_initializer": "uniform"},
        ids, expected_output_shape=(3, 4, 8),
    )


def test_harness_reverse():
    hidden = np.random.default_rng(0).normal(size=(2, 5, DIM)).astype("float32")
    run_layer_test(TokenEmbedding, {"vocabulary_size": VOCAB, "embedding_dim": DIM}, hidden,
                   expected_output_shape=(2, 5, VOCAB), call_kwargs={"reverse": True})


def test_scale_is_sqrt_of_embedding_dim():
    ids = np.array([[3, 0, 10], [1, 2, 3]])
    layer, table = built_layer()
    np.testing.assert_allclose(ops.convert_to_numpy(layer(ids)), table[ids] * 4.0, rtol=1e-6)
    unscaled, table = built_layer(scale=False)
    np.testing.assert_array_equal(ops.convert_to_numpy(unscaled(ids)), table[ids])


def test_reverse_is_the_transpose_of_the_same_matrix():
    layer, table = built_layer()
    hidden = np.random.default_rng(1).normal(size=(2, 3, DIM)).astype("float32")
    logits = layer(hidden, reverse=True)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    np.testing.assert_allclose(ops.convert_to_numpy(logits), hidden @ table.T, rtol=1e-5,
                               atol=1e-5)
    # Tied: a model that embeds and projects back owns a single matrix.
    ids = keras.Input((None,), dtype="int32")
    model = keras.Model(ids, layer(layer(ids), reverse=True))
    assert len(model.trainable_weights) == 1
    out = ops.convert_to_numpy(model(np.array([[4, 5]])))
    np.testing.assert_allclose(out[0], (table[[4, 5]] * 4.0) @ table.T, rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="reads a JAX program")
@pytest.mark.parametrize("quantized", [False, True])
def test_reverse_never_transposes_the_table_as_an_op_of_its_own(quantized):
    # XLA on a CPU fused `matmul(h, transpose(E))` with an add after it and then copied the
    # whole transposed table at every step of a search's loop (GPT-2: 110 ms a token).
    import jax

    layer, _ = built_layer()
    if quantized:
        layer.quantize("int8")
    values = [v.value for v in layer.variables]

    def logits(values, hidden):
        with keras.StatelessScope(state_mapping=list(zip(layer.variables, values))):
            return layer(hidden, reverse=True) + 1.0

    program = jax.make_jaxpr(logits)(values, np.ones((2, 1, DIM), "float32"))
    primitives = {equation.primitive.name for equation in program.jaxpr.eqns}
    assert "dot_general" in primitives and "transpose" not in primitives, primitives


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="reads a TF graph")
def test_the_tables_gradient_is_one_product_not_a_broadcast():
    # TensorFlow's gradient of an einsum over `...d` materialised `(..., vocabulary, dim)`
    # for the table: a fit of GPT-2 ran out of memory.
    import tensorflow as tf

    layer, _ = built_layer()
    hidden = tf.constant(np.ones((2, 3, DIM), "float32"))

    @tf.function
    def gradient():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(hidden, reverse=True) ** 2)
        return tape.gradient(loss, layer.trainable_variables)

    graph = gradient.get_concrete_function().graph
    shapes = [tuple(out.shape) for op in graph.get_operations() for out in op.outputs
              if out.shape.rank is not None]
    assert all(len(shape) < 3 or not {VOCAB, DIM} <= set(shape) for shape in shapes), shapes


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_reverse_runs_in_float32_on_the_master_weights(policy):
    layer, table = built_layer(dtype=policy)
    hidden = np.random.default_rng(2).normal(size=(2, 3, DIM)).astype("float32")
    logits = layer(hidden, reverse=True)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    # A float16 or bfloat16 copy of the matrix would be off by ~1e-3 relative.
    np.testing.assert_allclose(ops.convert_to_numpy(logits), hidden @ table.T, rtol=1e-5,
                               atol=1e-5)
    embedded = layer(np.array([[1, 2]]))
    assert keras.backend.standardize_dtype(embedded.dtype) == policy.split("_")[1]


def test_padding_mask():
    ids = np.array([[5, 6, 0, 0], [7, 0, 0, 0]])
    layer, _ = built_layer()
    mask = ops.convert_to_numpy(layer.compute_mask(ops.convert_to_tensor(ids)))
    np.testing.assert_array_equal(mask, ids != 0)
    assert built_layer(mask_zero=False)[0].compute_mask(ops.convert_to_tensor(ids)) is None
    # Hidden states keep their own mask in reverse mode.
    previous = ops.convert_to_tensor(ids != 0)
    assert layer.compute_mask(ops.zeros((2, 4, DIM)), previous) is previous


def test_mask_reaches_a_masked_layer_downstream():
    ids = np.array([[5, 6, 0], [7, 0, 0]])
    layer, table = built_layer()
    inputs = keras.Input((3,), dtype="int32")
    model = keras.Model(inputs, keras.layers.GlobalAveragePooling1D()(layer(inputs)))
    expected = [table[[5, 6]].mean(0) * 4.0, table[7] * 4.0]
    np.testing.assert_allclose(ops.convert_to_numpy(model(ids)), expected, rtol=1e-5)


def test_default_initializer_gives_unit_variance_after_scaling():
    layer = TokenEmbedding(2000, 64)
    layer.build()
    table = ops.convert_to_numpy(layer.embeddings)
    assert [w.name for w in layer.weights] == ["embeddings"]
    assert table.std() == pytest.approx(64 ** -0.5, rel=0.05)


@pytest.mark.parametrize("bad_id", [VOCAB, 50, -1])
def test_ids_outside_the_vocabulary_are_refused_eagerly(bad_id):
    layer, _ = built_layer()
    with pytest.raises(ValueError, match=rf"\[0, vocabulary_size={VOCAB}\).*{bad_id}"):
        layer(np.array([[1, bad_id, 2]]))


def test_float_ids_and_wrong_hidden_size_are_refused():
    layer, _ = built_layer()
    with pytest.raises(ValueError, match="integer token ids.*float32"):
        layer(np.array([[1.0, 2.0]], "float32"))
    with pytest.raises(ValueError, match=rf"embedding_dim={DIM}.*\(1, 2, 5\)"):
        layer(np.zeros((1, 2, 5), "float32"), reverse=True)


@pytest.mark.parametrize("kwargs", [{"vocabulary_size": 0, "embedding_dim": 4},
                                    {"vocabulary_size": 10, "embedding_dim": 2.0}])
def test_bad_constructor_arguments(kwargs):
    with pytest.raises(ValueError, match="must be a positive int"):
        TokenEmbedding(**kwargs)
