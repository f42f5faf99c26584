"""PositionEmbedding and the interpolation of position tables to new lengths and grids."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

from zoo.layers.class_token import ClassToken
from zoo.layers.patch_embedding import PatchEmbedding
from zoo.layers.position_embedding import (
    PositionEmbedding,
    interpolate_position_embedding,
    interpolate_position_embedding_2d,
)
from tests.layers.harness import run_layer_test


def table_of(layer: PositionEmbedding) -> np.ndarray:
    return ops.convert_to_numpy(layer.position_embeddings)


# --- the layer ------------------------------------------------------------------------------


def test_harness():
    x = np.random.default_rng(0).normal(size=(2, 6, 4)).astype("float32")
    run_layer_test(PositionEmbedding, {"sequence_length": 8}, x, expected_output_shape=(2, 6, 4))


def test_harness_with_start_index_and_initializer():
    x = np.random.default_rng(0).normal(size=(3, 2, 5)).astype("float32")
    run_layer_test(
        PositionEmbedding, {"sequence_length": 6, "initializer": "glorot_uniform"}, x,
        expected_output_shape=(3, 2, 5), call_kwargs={"start_index": 3},
    )


def test_returns_the_table_rows_for_every_batch_element():
    layer = PositionEmbedding(sequence_length=10)
    out = ops.convert_to_numpy(layer(np.zeros((3, 7, 4), "float32")))
    table = table_of(layer)
    assert table.shape == (10, 4)
    for b in range(3):
        np.testing.assert_array_equal(out[b], table[:7])


def test_start_index_int_tensor_and_compiled_loop():
    layer = PositionEmbedding(sequence_length=12)
    x = np.zeros((2, 3, 4), "float32")
    layer(x)
    table = table_of(layer)
    np.testing.assert_array_equal(ops.convert_to_numpy(layer(x, start_index=5))[0], table[5:8])
    np.testing.assert_array_equal(
        ops.convert_to_numpy(layer(x, start_index=ops.convert_to_tensor(9, "int32")))[1],
        table[9:12],
    )
    token = ops.zeros((1, 1, 4))

    def body(i, rows):
        return ops.slice_update(rows, (i, 0), ops.reshape(layer(token, start_index=i), (1, 4)))

    rows = ops.fori_loop(0, 12, body, ops.zeros((12, 4)))
    np.testing.assert_array_equal(ops.convert_to_numpy(rows), table)


def test_weight_name_and_default_initializer():
    layer = PositionEmbedding(sequence_length=400)
    layer(np.zeros((1, 400, 64), "float32"))
    assert [w.name for w in layer.weights] == ["position_embeddings"]
    table = table_of(layer)
    # Truncated normal, stddev 0.02 before truncation at two standard deviations.
    assert np.abs(table).max() <= 0.04 + 1e-6
    assert 0.015 < table.std() < 0.02


def test_too_long_inputs_name_both_lengths():
    layer = PositionEmbedding(sequence_length=5)
    with pytest.raises(ValueError, match=r"length 6.*sequence_length 5"):
        layer(np.zeros((1, 6, 3), "float32"))
    layer(np.zeros((1, 5, 3), "float32"))
    with pytest.raises(ValueError, match=r"length 7.*sequence_length 5"):
        layer(np.zeros((1, 7, 3), "float32"))
    with pytest.raises(ValueError, match=r"length 3 starting at position 4.*sequence_length 5"):
        layer(np.zeros((1, 3, 3), "float32"), start_index=4)


def test_bad_constructor_arguments():
    for bad in (0, -2, 3.5, None):
        with pytest.raises(ValueError, match="sequence_length"):
            PositionEmbedding(sequence_length=bad)


# --- 1-D interpolation ----------------------------------------------------------------------


def test_interpolation_to_the_same_length_is_the_identity():
    table = np.random.default_rng(1).normal(size=(17, 6)).astype("float32")
    np.testing.assert_allclose(
        ops.convert_to_numpy(interpolate_position_embedding(table, 17)), table, atol=1e-5
    )


@pytest.mark.parametrize("new_length", [5, 13, 31])
def test_interpolation_is_half_pixel_linear(new_length):
    # Reference: numpy's np.interp at the centres of new_length equal cells of [0, length).
    length = 11
    table = np.random.default_rng(2).normal(size=(length, 3)).astype("float32")
    sources = (np.arange(new_length) + 0.5) * length / new_length - 0.5
    expected = np.stack(
        [np.interp(sources, np.arange(length), table[:, j]) for j in range(3)], axis=-1
    )
    got = ops.convert_to_numpy(interpolate_position_embedding(table, new_length))
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_interpolation_keeps_a_leading_axis_and_the_dtype():
    table = np.zeros((1, 9, 4), "float16")
    out = interpolate_position_embedding(table, 12)
    assert tuple(out.shape) == (1, 12, 4)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"


@pytest.mark.parametrize("bad", [0, -4, 2.5, "8", True])
def test_bad_new_length_is_named(bad):
    with pytest.raises(ValueError, match=f"new_length.*{bad!r}"):
        interpolate_position_embedding(np.zeros((4, 2), "float32"), bad)


# --- 2-D interpolation ----------------------------------------------------------------------


def linear_field(rows: int, cols: int) -> np.ndarray:
    """Two features, linear in the (row, col) location of each cell centre in [0, 1]^2."""
    r = (np.arange(rows) + 0.5) / rows
    c = (np.arange(cols) + 0.5) / cols
    rr, cc = np.meshgrid(r, c, indexing="ij")
    return np.stack([2.0 * rr + 3.0 * cc, rr - cc], axis=-1).reshape(rows * cols, 2)


def interior(old: int, new: int) -> np.ndarray:
    """New cells whose bicubic support (two source cells either side) lies inside the grid."""
    source = (np.arange(new) + 0.5) * old / new - 0.5
    return (source >= 1) & (source <= old - 2)


@pytest.mark.parametrize("method", ["bicubic", "bilinear"])
def test_2d_interpolation_to_the_same_grid_is_the_identity(method):
    table = np.random.default_rng(3).normal(size=(1 + 5 * 7, 4)).astype("float32")
    out = interpolate_position_embedding_2d(table, (5, 7), (5, 7), method=method)
    np.testing.assert_allclose(ops.convert_to_numpy(out), table, atol=1e-5)


@pytest.mark.parametrize("old, new", [((6, 6), (10, 10)), ((8, 6), (16, 9))])
def test_2d_interpolation_keeps_a_linear_function_of_the_location(old, new):
    cls = np.array([[7.0, -7.0]])
    table = np.concatenate([cls, linear_field(*old)]).astype("float32")
    out = ops.convert_to_numpy(interpolate_position_embedding_2d(table, old, new))
    assert out.shape == (1 + new[0] * new[1], 2)
    np.testing.assert_array_equal(out[0], cls[0])
    grid = out[1:].reshape(new[0], new[1], 2)
    expected = linear_field(*new).reshape(new[0], new[1], 2)
    inside = np.ix_(interior(old[0], new[0]), interior(old[1], new[1]))
    np.testing.assert_allclose(grid[inside], expected[inside], atol=1e-3)
    # Near the border the resize clamps to the edge cells, so it is only roughly linear.
    np.testing.assert_allclose(grid, expected, atol=0.15)


def test_2d_interpolation_keeps_prefix_rows_exactly():
    rng = np.random.default_rng(4)
    table = rng.normal(size=(2 + 4 * 4, 8)).astype("float32")
    out = ops.convert_to_numpy(
        interpolate_position_embedding_2d(table, (4, 4), (3, 5), num_prefix_tokens=2)
    )
    assert out.shape == (2 + 15, 8)
    np.testing.assert_array_equal(out[:2], table[:2])
    batched = interpolate_position_embedding_2d(table[None], (4, 4), (6, 6), num_prefix_tokens=2)
    assert tuple(batched.shape) == (1, 2 + 36, 8)


def test_2d_interpolation_without_prefix_tokens():
    table = np.random.default_rng(5).normal(size=(9, 2)).astype("float32")
    out = interpolate_position_embedding_2d(table, (3, 3), (6, 6), num_prefix_tokens=0,
                                            method="nearest")
    grid = ops.convert_to_numpy(out).reshape(6, 6, 2)
    np.testing.assert_array_equal(grid[::2, ::2], table.reshape(3, 3, 2))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"old_grid": (4, 4), "new_grid": (0, 4)}, r"new_grid.*\(0, 4\)"),
        ({"old_grid": (4, 4), "new_grid": (8,)}, r"new_grid.*\(8,\)"),
        ({"old_grid": (4, 4), "new_grid": (2.5, 2)}, r"new_grid.*2\.5"),
        ({"old_grid": (3, 4), "new_grid": (8, 8)}, r"17 rows.*3x4 = 12"),
        ({"old_grid": (4, 4), "new_grid": (8, 8), "num_prefix_tokens": -1}, "-1"),
        ({"old_grid": (4, 4), "new_grid": (8, 8), "method": "cubic"}, "'cubic'"),
    ],
)
def test_bad_2d_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        interpolate_position_embedding_2d(np.zeros((17, 4), "float32"), **kwargs)


# --- resizing a layer -----------------------------------------------------------------------


def test_resized_1d_interpolates_the_table():
    layer = PositionEmbedding(sequence_length=10, name="positions")
    layer(np.zeros((1, 10, 3), "float32"))
    longer = layer.resized(25)
    assert longer.sequence_length == 25
    assert {**longer.get_config(), "sequence_length": 10} == layer.get_config()
    np.testing.assert_allclose(
        table_of(longer),
        ops.convert_to_numpy(interpolate_position_embedding(table_of(layer), 25)), atol=1e-6,
    )
    assert layer.sequence_length == 10 and table_of(layer).shape == (10, 3)


def test_a_vit_built_at_32px_runs_at_64px():
    patch, dim = 4, 16

    def vit_stem(image_size: int, positions: PositionEmbedding | None = None):
        images = keras.Input((image_size, image_size, 3))
        tokens = ClassToken(name="cls")(PatchEmbedding(patch, dim, name="patches")(images))
        positions = positions or PositionEmbedding(sequence_length=tokens.shape[1])
        return keras.Model(images, tokens + positions(tokens)), positions

    small, positions = vit_stem(32)
    assert positions.sequence_length == 1 + 8 * 8
    grid = small.get_layer("patches").grid_size(64)
    assert grid == (16, 16)
    bigger_positions = positions.resized(new_grid=grid)
    assert bigger_positions.sequence_length == 1 + 16 * 16
    np.testing.assert_allclose(
        table_of(bigger_positions),
        ops.convert_to_numpy(interpolate_position_embedding_2d(table_of(positions), (8, 8), grid)),
        atol=1e-6,
    )
    np.testing.assert_array_equal(table_of(bigger_positions)[0], table_of(positions)[0])
    large, _ = vit_stem(64, bigger_positions)
    for name in ("patches", "cls"):
        large.get_layer(name).set_weights(small.get_layer(name).get_weights())
    images = np.random.default_rng(6).uniform(size=(2, 64, 64, 3)).astype("float32")
    assert tuple(large(images).shape) == (2, 257, dim)


def test_resized_checks_its_arguments():
    layer = PositionEmbedding(sequence_length=1 + 3 * 4)
    with pytest.raises(ValueError, match="built"):
        layer.resized(20)
    layer(np.zeros((1, 13, 2), "float32"))
    with pytest.raises(ValueError, match="not a square grid"):
        layer.resized(new_grid=(6, 8))
    with pytest.raises(ValueError, match=r"sequence_length 40 does not match new_grid \(6, 8\)"):
        layer.resized(40, old_grid=(3, 4), new_grid=(6, 8))
    assert layer.resized(49, old_grid=(3, 4), new_grid=(6, 8)).sequence_length == 49
    with pytest.raises(ValueError, match="new_length.*0"):
        layer.resized(0)
