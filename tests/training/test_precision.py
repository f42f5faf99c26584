"""Global precision policy and loss scaling for float16."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from training.precision import PRECISIONS, set_precision, wrap_optimizer_for_precision


@pytest.fixture(autouse=True)
def _restore_policy():
    previous = keras.mixed_precision.global_policy()
    yield
    keras.mixed_precision.set_global_policy(previous)


@pytest.mark.parametrize("name", PRECISIONS)
def test_set_precision_sets_the_policy_of_new_layers(name):
    policy = set_precision(name)
    assert policy.name == name
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    assert layer.dtype_policy.name == name
    assert layer.kernel.dtype == "float32"  # variables stay float32
    assert layer.compute_dtype == name.replace("mixed_", "")


def test_unknown_precision_lists_the_valid_names():
    with pytest.raises(ValueError) as error:
        set_precision("float16")
    for name in ("'float16'", *PRECISIONS):
        assert name in str(error.value)


def test_wrap_only_for_mixed_float16():
    adam = keras.optimizers.Adam()
    assert wrap_optimizer_for_precision(adam, "float32") is adam
    assert wrap_optimizer_for_precision(adam, "mixed_bfloat16") is adam
    wrapped = wrap_optimizer_for_precision(adam, "mixed_float16")
    assert isinstance(wrapped, keras.optimizers.LossScaleOptimizer)
    assert wrapped.inner_optimizer is adam
    # No double wrapping.
    assert wrap_optimizer_for_precision(wrapped, "mixed_float16") is wrapped
    set_precision("mixed_float16")
    global_wrapped = wrap_optimizer_for_precision(keras.optimizers.SGD())
    assert isinstance(global_wrapped, keras.optimizers.LossScaleOptimizer)
    with pytest.raises(ValueError):
        wrap_optimizer_for_precision(adam, "float17")


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    return model


def test_compile_wraps_mixed_float16_models_itself_and_never_twice():
    # The Keras behaviour precision.py documents: compile adds loss scaling by itself.
    set_precision("mixed_float16")
    model = _model()
    model.compile(optimizer=keras.optimizers.Adam(), loss="mse")
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)

    wrapped = wrap_optimizer_for_precision(keras.optimizers.Adam(), "mixed_float16")
    model = _model()
    model.compile(optimizer=wrapped, loss="mse")
    assert model.optimizer is wrapped
    assert not isinstance(model.optimizer.inner_optimizer, keras.optimizers.LossScaleOptimizer)
    history = model.fit(np.ones((4, 3)), np.ones((4, 2)), epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert wrapped.built  # fit trained with our wrapper (it may skip overflowing steps)


def test_compile_does_not_wrap_float32_or_bfloat16_models():
    for name in ("float32", "mixed_bfloat16"):
        set_precision(name)
        model = _model()
        model.compile(optimizer=keras.optimizers.Adam(), loss="mse")
        assert not isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
