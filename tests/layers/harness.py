"""One test harness that every layer of `layers/` goes through.

`run_layer_test` checks, for one layer class and one set of constructor arguments:

- config round trip: `from_config(get_config())` rebuilds a layer with the same config;
- eager and symbolic calls give the same output shape;
- a `.keras` save and reload inside a model gives equal outputs;
- one `fit` step runs and changes at least one trainable weight;
- the layer builds and runs under `mixed_bfloat16` and `mixed_float16`, and its outputs there
  stay close to the float32 ones (same weights).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable

import keras
import numpy as np
from keras import ops


def _to_numpy(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return type(x)(_to_numpy(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32") if _is_float(x) else x))


def _is_float(x: Any) -> bool:
    return "float" in str(keras.backend.standardize_dtype(x.dtype))


def _is_plain(value: Any) -> bool:
    """Numbers, strings, None, and lists or tuples of them: values a config stores as is."""
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def _first(x: Any) -> Any:
    """The main output of a layer whose call may return a tuple or dict."""
    if isinstance(x, (list, tuple)):
        return x[0]
    return x


def _as_list(inputs: Any) -> list:
    return list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]


def _model_around(layer: keras.layers.Layer, input_data: Any, call_kwargs: dict) -> keras.Model:
    """A functional model that calls `layer` on inputs shaped like `input_data`."""
    arrays = _as_list(input_data)
    symbolic = [
        keras.Input(shape=a.shape[1:], batch_size=None, dtype=str(a.dtype)) for a in arrays
    ]
    if isinstance(input_data, (list, tuple)):
        out = layer(*symbolic, **call_kwargs)
    else:
        out = layer(symbolic[0], **call_kwargs)
    return keras.Model(symbolic if len(symbolic) > 1 else symbolic[0], _first(out))


def _call(layer: keras.layers.Layer, input_data: Any, call_kwargs: dict, **extra: Any) -> Any:
    if isinstance(input_data, (list, tuple)):
        return layer(*input_data, **call_kwargs, **extra)
    return layer(input_data, **call_kwargs, **extra)


def run_layer_test(
    layer_cls: type,
    init_kwargs: dict,
    input_data: Any,
    expected_output_shape: tuple | None = None,
    call_kwargs: dict | None = None,
    run_fit: bool = True,
    run_mixed_precision: bool = True,
    bfloat16_atol: float = 0.05,
    float16_atol: float = 0.01,
    custom_objects: dict | None = None,
    after_build: Callable[[keras.layers.Layer], None] | None = None,
    expected_num_trainable_weights: int | None = None,
    expected_num_non_trainable_weights: int | None = None,
) -> keras.layers.Layer:
    """Runs the common checks on `layer_cls(**init_kwargs)` and returns the float32 layer.

    Args:
        layer_cls: the layer class under test.
        init_kwargs: constructor arguments.
        input_data: a numpy array, or a list of arrays passed as positional arguments.
        expected_output_shape: the shape of the (first) output, if known.
        call_kwargs: keyword arguments for every call (not tensors).
        run_fit: whether to train one step inside a model.
        run_mixed_precision: whether to check the mixed-precision policies.
        bfloat16_atol: largest absolute difference allowed between the `mixed_bfloat16` and
            float32 outputs (bfloat16 keeps 8 bits of mantissa: about 2 decimal digits).
        float16_atol: the same for `mixed_float16` (11 bits: about 3 digits).
        custom_objects: extra objects for `keras.saving.load_model`.
        after_build: called on the built float32 layer (to set weights, say).
        expected_num_trainable_weights: how many trainable weights the built layer has.
        expected_num_non_trainable_weights: how many non-trainable ones.
    """
    call_kwargs = dict(call_kwargs or {})

    # 1. Config round trip: the constructor's arguments, and only those.
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    rebuilt = layer_cls.from_config(config)
    assert rebuilt.get_config() == config, (config, rebuilt.get_config())
    for key, value in init_kwargs.items():
        assert key in config, f"get_config() lacks the constructor argument {key!r}"
        # Objects, and names of objects ("zeros"), are stored serialized: compared above.
        if _is_plain(value) and _is_plain(config[key]):
            assert _plain(config[key]) == _plain(value), (
                f"get_config()[{key!r}] is {config[key]!r}, not the given {value!r}")

    # 2. Eager call.
    eager_out = _call(layer, input_data, call_kwargs)
    if after_build is not None:
        after_build(layer)
        eager_out = _call(layer, input_data, call_kwargs)
    eager_main = _first(eager_out)
    if expected_num_trainable_weights is not None:
        assert len(layer.trainable_weights) == expected_num_trainable_weights, (
            [w.path for w in layer.trainable_weights])
    if expected_num_non_trainable_weights is not None:
        assert len(layer.non_trainable_weights) == expected_num_non_trainable_weights, (
            [w.path for w in layer.non_trainable_weights])
    if not isinstance(input_data, (list, tuple)) and not call_kwargs:
        try:
            declared = layer.compute_output_shape(input_data.shape)
        except NotImplementedError:
            declared = None
        if isinstance(declared, tuple) and all(d is None or isinstance(d, int)
                                               for d in declared):
            assert tuple(declared) == tuple(eager_main.shape), (
                f"compute_output_shape says {declared}, the call gives "
                f"{tuple(eager_main.shape)}")
    if expected_output_shape is not None:
        assert tuple(eager_main.shape) == tuple(expected_output_shape), (
            f"eager output shape {tuple(eager_main.shape)} != {tuple(expected_output_shape)}"
        )

    # 3. Symbolic call through a functional model built around a fresh layer.
    sym_layer = layer_cls.from_config(config)
    model = _model_around(sym_layer, input_data, call_kwargs)
    sym_layer.set_weights(layer.get_weights())
    model_out = model(input_data)
    np.testing.assert_allclose(
        _to_numpy(model_out), _to_numpy(eager_main), atol=1e-5, rtol=1e-5,
        err_msg="symbolic (functional model) and eager outputs differ",
    )

    # 4. `.keras` save and reload with equal outputs.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        reloaded = keras.saving.load_model(path, custom_objects=custom_objects)
        np.testing.assert_allclose(
            _to_numpy(reloaded(input_data)), _to_numpy(model_out), atol=1e-5, rtol=1e-5,
            err_msg="outputs differ after .keras save and reload",
        )

    # 5. One fit step changes the trainable weights.
    if run_fit and model.trainable_weights:
        target = np.random.default_rng(0).normal(size=_to_numpy(model_out).shape)
        before = [np.array(w) for w in _to_numpy([v.value for v in model.trainable_weights])]
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        model.fit(input_data, target.astype("float32"), batch_size=len(_as_list(input_data)[0]),
                  epochs=1, verbose=0)
        after = _to_numpy([v.value for v in model.trainable_weights])
        assert any(not np.allclose(b, a) for b, a in zip(before, after)), "fit changed no weight"
        assert np.all(np.isfinite(_to_numpy(model(input_data)))), "non-finite output after fit"

    # 6. Mixed precision: builds, computes in the low dtype, stays close to float32.
    if run_mixed_precision:
        reference = _to_numpy(eager_main)
        for policy, atol in (("mixed_bfloat16", bfloat16_atol), ("mixed_float16", float16_atol)):
            mp_layer = layer_cls.from_config({**config, "dtype": policy})
            _call(mp_layer, input_data, call_kwargs)
            mp_layer.set_weights(layer.get_weights())
            out = _first(_call(mp_layer, input_data, call_kwargs))
            assert mp_layer.compute_dtype == policy.split("_")[1]
            got = _to_numpy(out)
            assert np.all(np.isfinite(got)), f"non-finite outputs under {policy}"
            if _is_float(eager_main):
                np.testing.assert_allclose(
                    got, reference, atol=atol, rtol=0.05,
                    err_msg=f"{policy} outputs are far from float32 ones",
                )
    return layer
