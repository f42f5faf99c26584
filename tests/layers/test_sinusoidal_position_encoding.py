"""SinusoidalPositionEncoding against the paper's formula and a worked example."""

from __future__ import annotations

import math
import warnings

import keras
import numpy as np
import pytest
from keras import ops

from zoo.layers.sinusoidal_position_encoding import (
    SinusoidalPositionEncoding,
    sinusoidal_position_encoding,
)
from tests.layers.harness import run_layer_test


def paper_encoding(pos: int, dim: int, d_model: int, base: float = 10000.0) -> float:
    """PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d))."""
    two_i = dim - dim % 2
    angle = pos / base ** (two_i / d_model)
    return math.sin(angle) if dim % 2 == 0 else math.cos(angle)


def paper_table(length: int, d_model: int, start: int = 0, base: float = 10000.0) -> np.ndarray:
    return np.array(
        [[paper_encoding(p, i, d_model, base) for i in range(d_model)]
         for p in range(start, start + length)]
    )


def test_harness():
    x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")
    run_layer_test(SinusoidalPositionEncoding, {"max_wavelength": 10000.0}, x,
                   expected_output_shape=(2, 5, 16))


def test_harness_with_start_index():
    x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
    run_layer_test(SinusoidalPositionEncoding, {"max_wavelength": 100.0}, x,
                   expected_output_shape=(2, 3, 8), call_kwargs={"start_index": 4})


def test_worked_example():
    # d_model = 512, pos = 1, dimensions 0..4 are sin(1), cos(1),
    # sin(1/10000^(2/512)), cos(1/10000^(2/512)), sin(1/10000^(4/512)).
    table = ops.convert_to_numpy(sinusoidal_position_encoding(2, 512))
    row = table[1]
    assert row[0] == pytest.approx(0.841471, abs=1e-6)
    assert row[1] == pytest.approx(0.540302, abs=1e-6)
    assert row[2] == pytest.approx(math.sin(1 / 10000 ** (2 / 512)), abs=1e-6)
    assert row[3] == pytest.approx(math.cos(1 / 10000 ** (2 / 512)), abs=1e-6)
    assert row[4] == pytest.approx(math.sin(1 / 10000 ** (4 / 512)), abs=1e-6)
    expected = [paper_encoding(1, i, 512) for i in range(512)]
    np.testing.assert_allclose(row, expected, atol=1e-6)
    # Position 0: sin(0) = 0 at even indices, cos(0) = 1 at odd ones.
    np.testing.assert_allclose(table[0], np.tile([0.0, 1.0], 256), atol=1e-7)


def test_whole_table_matches_the_paper():
    table = ops.convert_to_numpy(sinusoidal_position_encoding(64, 32))
    assert table.dtype == np.float32
    np.testing.assert_allclose(table, paper_table(64, 32), atol=2e-5)


def test_layer_matches_the_paper_for_every_batch_element():
    x = np.ones((3, 10, 12), "float32")
    out = ops.convert_to_numpy(SinusoidalPositionEncoding(max_wavelength=50.0)(x))
    for b in range(3):
        np.testing.assert_allclose(out[b], paper_table(10, 12, base=50.0), atol=1e-5)


@pytest.mark.parametrize("k", [1, 7])
def test_start_index_gives_later_rows(k):
    full = ops.convert_to_numpy(sinusoidal_position_encoding(20, 16))
    layer = SinusoidalPositionEncoding()
    x = np.zeros((2, 4, 16), "float32")
    from_int = ops.convert_to_numpy(layer(x, start_index=k))
    from_tensor = ops.convert_to_numpy(layer(x, start_index=ops.convert_to_tensor(k, "int32")))
    np.testing.assert_allclose(from_int[0], full[k:k + 4], atol=1e-6)
    np.testing.assert_allclose(from_tensor[1], full[k:k + 4], atol=1e-6)
    np.testing.assert_allclose(
        ops.convert_to_numpy(sinusoidal_position_encoding(4, 16, start_index=k)),
        full[k:k + 4], atol=1e-6,
    )


def test_start_index_from_a_compiled_loop():
    # One token at a time, the position being the loop counter (a traced tensor on JAX and
    # inside a graph on TensorFlow), as in cached decoding.
    layer = SinusoidalPositionEncoding()
    steps, d_model = 6, 8
    token = ops.zeros((1, 1, d_model))

    def body(i, table):
        row = layer(token, start_index=i)  # (1, 1, d_model)
        return ops.slice_update(table, (i, 0), ops.reshape(row, (1, d_model)))

    table = ops.fori_loop(0, steps, body, ops.zeros((steps, d_model)))
    np.testing.assert_allclose(ops.convert_to_numpy(table), paper_table(steps, d_model),
                               atol=1e-5)


def test_dynamic_sequence_length_in_a_functional_model():
    inputs = keras.Input(shape=(None, 6))
    model = keras.Model(inputs, SinusoidalPositionEncoding()(inputs))
    for length in (3, 9):
        out = ops.convert_to_numpy(model(np.zeros((2, length, 6), "float32")))
        np.testing.assert_allclose(out[1], paper_table(length, 6), atol=1e-5)


def test_output_takes_the_input_dtype():
    layer = SinusoidalPositionEncoding(dtype="float16")
    out = layer(np.zeros((1, 3, 4), "float16"))
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    np.testing.assert_allclose(ops.convert_to_numpy(out)[0].astype("float32"),
                               paper_table(3, 4), atol=1e-3)


def test_odd_d_model_is_refused():
    with pytest.raises(ValueError, match="d_model=7"):
        sinusoidal_position_encoding(4, 7)
    with pytest.raises(ValueError, match="d_model=5"):
        SinusoidalPositionEncoding()(np.zeros((1, 3, 5), "float32"))


def test_bad_max_wavelength_is_refused():
    with pytest.raises(ValueError, match="-1"):
        SinusoidalPositionEncoding(max_wavelength=-1.0)


def test_padding_mask_passes_through_without_warning():
    ids = np.array([[3, 4, 0, 0]])
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(ids)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        encoded = SinusoidalPositionEncoding()(embedded)
    mask = getattr(encoded, "_keras_mask", None)
    assert mask is not None, "the padding mask was dropped"
    np.testing.assert_array_equal(ops.convert_to_numpy(mask), [[True, True, False, False]])
    np.testing.assert_allclose(ops.convert_to_numpy(encoded)[0],
                               ops.convert_to_numpy(sinusoidal_position_encoding(4, 4)),
                               atol=1e-6)


def test_concatenated_layout_is_the_same_sinusoids_sines_first():
    """layout="concatenated" (Marian): all sines, then all cosines, same wavelengths."""
    interleaved = ops.convert_to_numpy(sinusoidal_position_encoding(7, 16, start_index=3))
    concatenated = ops.convert_to_numpy(
        sinusoidal_position_encoding(7, 16, start_index=3, layout="concatenated"))
    np.testing.assert_allclose(concatenated[:, :8], interleaved[:, 0::2], atol=1e-6)
    np.testing.assert_allclose(concatenated[:, 8:], interleaved[:, 1::2], atol=1e-6)
    x = np.zeros((2, 7, 16), "float32")
    layer = SinusoidalPositionEncoding(layout="concatenated")
    np.testing.assert_allclose(ops.convert_to_numpy(layer(x, start_index=3))[0], concatenated,
                               atol=1e-6)
    run_layer_test(SinusoidalPositionEncoding, {"layout": "concatenated"}, x,
                   expected_output_shape=(2, 7, 16))
    with pytest.raises(ValueError, match="layout"):
        SinusoidalPositionEncoding(layout="sines_first")
