"""Each use of Keras' private API (layers/keras_internals.py) does what the zoo relies on."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import h5py
import keras
import numpy as np
import pytest

from zoo.layers.keras_internals import (
    APPLY_WEIGHT_DECAY_HOOK,
    gradient_recording,
    keras_mask,
    optimizer_variable_index,
    saved_weight_paths,
    uses_weight_decay,
    weight_decay_hook,
)


def _private_keras_uses(tree: ast.AST, private: set[str]):
    """The lines of `tree` that import `keras.src` or use a name of `private` that the module
    does not define itself (an overridden hook is ours)."""
    ours = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in private and node.attr not in ours:
            yield node.lineno
        elif isinstance(node, ast.Import) and any(
                alias.name.startswith("keras.src") for alias in node.names):
            yield node.lineno
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("keras.src"):
            yield node.lineno


def test_no_other_module_uses_a_private_keras_name():
    """`keras.src` and the private methods and attributes of Keras' layers, models,
    optimizers, callbacks and variables appear only in keras_internals.py."""
    private = {name for cls in (keras.Model, keras.layers.Layer, keras.optimizers.Optimizer,
                                keras.callbacks.Callback, keras.Variable)
               for name in dir(cls) if name.startswith("_") and not name.startswith("__")}
    found = set()
    for package in ("zoo", "zoo.layers", "zoo.training"):
        for folder in importlib.util.find_spec(package).submodule_search_locations:
            for path in Path(folder).rglob("*.py"):
                if path.name != "keras_internals.py":
                    tree = ast.parse(path.read_text(encoding="utf-8"))
                    found |= {f"{path.name}:{line}"
                              for line in _private_keras_uses(tree, private)}
    assert found == set()


def _model() -> keras.Model:
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="a"),
                             keras.layers.LayerNormalization(name="norm"),
                             keras.layers.Dense(2, name="b")])


def test_keras_mask_is_the_mask_keras_masking_attached():
    ids = np.array([[5, 6, 0], [1, 0, 0]])
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(ids)
    np.testing.assert_array_equal(np.asarray(keras_mask(embedded)), ids != 0)
    assert keras_mask(keras.ops.ones((2, 3, 4))) is None
    inputs = keras.Input((3,), dtype="int32")
    symbolic = keras.layers.Embedding(10, 4, mask_zero=True)(inputs)
    assert tuple(keras_mask(symbolic).shape) == (None, 3)


def test_saved_weight_paths_are_the_keys_save_weights_writes(tmp_path):
    model = _model()
    path = tmp_path / "m.weights.h5"
    model.save_weights(path)
    written = {}

    def collect(name, item):  # visititems stops at the first non-None return
        if isinstance(item, h5py.Dataset):
            written[name] = item.shape

    with h5py.File(path, "r") as f:
        f.visititems(collect)
    found = saved_weight_paths(model)
    assert set(found) == set(written)
    for key, variable in found.items():
        assert tuple(variable.shape) == tuple(written[key])


def test_optimizer_variable_index_is_the_position_among_the_built_variables():
    model = _model()
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    for position, variable in enumerate(model.trainable_variables):
        assert optimizer_variable_index(optimizer, variable) == position


def test_uses_weight_decay_follows_the_exclusions():
    model = _model()
    optimizer = keras.optimizers.AdamW(weight_decay=0.1)
    optimizer.exclude_from_weight_decay(var_names=["gamma", "beta", "bias"])
    optimizer.build(model.trainable_variables)
    decayed = [v.path.split("/", 1)[1] for v in model.trainable_variables
               if uses_weight_decay(optimizer, v)]
    assert decayed == ["a/kernel", "b/kernel"]


def test_the_weight_decay_hook_exists_and_is_called(monkeypatch):
    assert callable(getattr(keras.optimizers.Optimizer, APPLY_WEIGHT_DECAY_HOOK))
    calls = []

    class Spy(keras.optimizers.AdamW):
        def _apply_weight_decay(self, variables):
            calls.append(len(variables))
            super()._apply_weight_decay(variables)

    model = _model()
    model.compile(optimizer=Spy(weight_decay=0.1), loss="mse")
    model.fit(np.ones((4, 3)), np.ones((4, 2)), epochs=1, batch_size=4, verbose=0)
    assert calls and calls[0] == len(model.trainable_variables)


def test_weight_decay_hook_routes_keras_decay_step_to_the_named_method():
    calls = []

    @weight_decay_hook("decay")
    class Routed(keras.optimizers.AdamW):
        def decay(self, variables, keras_decay):
            calls.append(len(variables))
            if self.apply_keras_decay:
                keras_decay(variables)

    def step(apply_keras_decay: bool) -> np.ndarray:
        variable = keras.Variable(np.ones(3, "float32"))
        optimizer = Routed(learning_rate=0.1, weight_decay=0.5)
        optimizer.apply_keras_decay = apply_keras_decay
        optimizer.apply_gradients([(np.zeros(3, "float32"), variable)])
        return np.asarray(keras.ops.convert_to_numpy(variable))

    # Zero gradients: Adam's step is 0, only the decay acts (1 - lr * wd = 0.95).
    np.testing.assert_allclose(step(True), 0.95, rtol=1e-6)
    np.testing.assert_array_equal(step(False), 1.0)
    assert calls == [1, 1]


def test_weight_decay_hook_refuses_a_class_without_the_hook_or_the_method():
    with pytest.raises(TypeError, match="no method 'missing'"):
        weight_decay_hook("missing")(type("A", (keras.optimizers.AdamW,), {}))
    with pytest.raises(TypeError, match="weight-decay hook"):
        weight_decay_hook("decay")(type("B", (), {"decay": lambda self, v, d: None}))


def test_gradient_recording_is_true_inside_a_tape_only():
    if keras.backend.backend() != "tensorflow":
        assert not gradient_recording()
        return
    import tensorflow as tf

    seen = {}

    @tf.function(autograph=False)
    def step(x):
        seen["traced, no tape"] = gradient_recording()
        with tf.GradientTape() as tape:
            tape.watch(x)
            seen["traced, in a tape"] = gradient_recording()
            y = x * x
        return tape.gradient(y, x)

    assert not gradient_recording()
    with tf.GradientTape():
        seen["eager, in a tape"] = gradient_recording()
    step(tf.constant(1.0))
    assert seen == {"eager, in a tape": True, "traced, no tape": False,
                    "traced, in a tape": True}
