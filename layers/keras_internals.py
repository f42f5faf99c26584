"""Every use of Keras' (and TensorFlow's) private API in the zoo, fenced in one module.

Keras 3 has no public way yet to do these few things; each function here wraps one private
name, and tests/layers/test_keras_internals.py checks each against the behaviour we rely on,
so that a Keras upgrade that moves them fails there, in one place, and not deep inside a
model. Known to work with Keras 3.15 (the version pyproject.toml pins).
"""

from __future__ import annotations

import contextlib
import gc
from typing import Any, Callable, Iterator

import keras


def keras_mask(tensor: Any) -> Any | None:
    """The padding mask Keras masking attached to `tensor` (the output of an
    `Embedding(mask_zero=True)`, say), or None.

    Uses `keras.src.backend.common.masking.get_keras_mask` (the `_keras_mask` attribute,
    or Keras' table for tensors that take no attributes).
    """
    from keras.src.backend.common.masking import get_keras_mask

    return get_keras_mask(tensor)


def saved_weight_paths(model: keras.Model) -> dict[str, Any]:
    """`{h5 key: variable}`: where `model.save_weights` writes each of `model`'s variables
    (keys like `layers/dense/vars/0`), found by Keras' own traversal of the model.

    Uses `keras.src.saving.saving_lib._save_state` with an in-memory `NpzIOStore`.
    """
    from keras.src.saving import saving_lib

    store = saving_lib.NpzIOStore("unused.npz", mode="w")
    saving_lib._save_state(model, weights_store=store, assets_store=None, inner_path="",
                           visited_saveables=set())
    found = {}
    for inner_path, variables in store.contents.items():
        prefix = "" if inner_path == "__root__" else f"{inner_path}/"
        for index, variable in variables.items():
            found[f"{prefix}vars/{index}"] = variable
    return found


def optimizer_variable_index(optimizer: keras.optimizers.Optimizer, variable: Any) -> int:
    """The position of `variable` among the variables `optimizer` was built for (the index of
    its slots). Uses `Optimizer._get_variable_index`."""
    return optimizer._get_variable_index(variable)


def uses_weight_decay(optimizer: keras.optimizers.Optimizer, variable: Any) -> bool:
    """Whether `optimizer` decays `variable` (not excluded by `exclude_from_weight_decay`).
    Uses `Optimizer._use_weight_decay`."""
    return bool(optimizer._use_weight_decay(variable))


# The optimizer hook Keras calls once per step with the trained variables, to apply the
# decoupled weight decay (a protected method of keras.optimizers.Optimizer). Override it
# through `weight_decay_hook`, never by name.
APPLY_WEIGHT_DECAY_HOOK = "_apply_weight_decay"


def weight_decay_hook(method_name: str) -> Callable[[type], type]:
    """Class decorator for an optimizer class: Keras' per-step weight-decay hook
    (`APPLY_WEIGHT_DECAY_HOOK`) calls `self.<method_name>(variables, keras_decay)` instead,
    where `keras_decay(variables)` applies the decay the parent class would.

    Raises:
        TypeError: at decoration, if the class has no such Keras hook (a Keras upgrade
            renamed it) or no method `method_name`.

    Example:
    >>> @weight_decay_hook("decay")
    ... class NoDecay(keras.optimizers.AdamW):
    ...     def decay(self, variables, keras_decay):
    ...         pass  # never decays
    """

    def decorate(cls: type) -> type:
        if not callable(getattr(cls, APPLY_WEIGHT_DECAY_HOOK, None)):
            raise TypeError(f"{cls.__name__} has no Keras weight-decay hook "
                            f"{APPLY_WEIGHT_DECAY_HOOK!r} (has Keras changed?)")
        if not callable(getattr(cls, method_name, None)):
            raise TypeError(f"{cls.__name__} has no method {method_name!r}")

        def hook(self: Any, variables: list) -> Any:
            keras_decay = getattr(super(cls, self), APPLY_WEIGHT_DECAY_HOOK)
            return getattr(self, method_name)(variables, keras_decay)

        hook.__name__ = hook.__qualname__ = APPLY_WEIGHT_DECAY_HOOK
        setattr(cls, APPLY_WEIGHT_DECAY_HOOK, hook)
        return cls

    return decorate


def in_xla_compiled_graph() -> bool:
    """Whether TensorFlow is tracing a function that XLA will compile (`jit_compile=True`).

    TensorFlow marks such a trace with an XLA control-flow context, which its own ops consult
    (`tensorflow.python.ops.control_flow_util`); there is no public way to ask. False on other
    backends, eagerly, and in a graph that runs without XLA (an exported SavedModel's).
    """
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util

    if tf.executing_eagerly():
        return False
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def gradient_recording() -> bool:
    """Whether a TensorFlow gradient tape is recording the ops run or traced now (inside
    `with tf.GradientTape():`, as Keras' TensorFlow train step computes its loss).

    Uses `tensorflow.python.eager.record.could_possibly_record`, the test TensorFlow's own
    ops make before recording. False on other backends.
    """
    if keras.backend.backend() != "tensorflow":
        return False
    from tensorflow.python.eager import record

    return bool(record.could_possibly_record())


def set_inputs_quantizer(layer: keras.layers.Layer, quantizer: Any) -> None:
    """Gives an int8 `Dense` or `EinsumDense` the quantizer it applies to its inputs.

    Keras' `_int8_build` sets `layer.inputs_quantizer` (an `AbsMaxQuantizer`, or None for
    weight-only int8), and `_int8_call` reads it as the call is traced: `if
    self.inputs_quantizer:` the inputs are quantized and the product is int8 x int8;
    otherwise the product is float, against the kernel cast to the compute dtype.
    """
    layer.inputs_quantizer = quantizer


def int8_inputs_quantized(layer: keras.layers.Layer) -> bool:
    """Whether an int8 `Dense` or `EinsumDense` quantizes its inputs in the computation traced
    now: Keras' `_int8_call` tests `if self.inputs_quantizer:` (a zoo `RoutedInputQuantizer`
    answers by its route; Keras' own `AbsMaxQuantizer` is always truthy)."""
    return bool(getattr(layer, "inputs_quantizer", None))


def mark_quantized(layer: keras.layers.Layer) -> None:
    """Tells Keras that `layer` holds quantized variables now (its own `quantize` or a build
    under a quantized dtype policy made them), as Keras' `Dense` and `Embedding` do.

    Keras reads the mark (`Layer._is_quantized`) to refuse a second `quantize` and, when a
    quantized dtype policy is assigned to a built layer, to skip quantizing it again.
    """
    layer._is_quantized = True


def nested_layers(layer: keras.layers.Layer) -> list[keras.layers.Layer]:
    """Every layer inside `layer`, at any depth, each once (not `layer` itself): the layers
    `Model.quantize` visits. Uses `Layer._flatten_layers`."""
    return list(layer._flatten_layers(include_self=False, recursive=True))


def resolve_policy_map(layer: keras.layers.Layer) -> None:
    """Gives `layer` the policy its `DTypePolicyMap` holds for its path, in place of the map.

    A model loaded with a `DTypePolicyMap` policy hands the map to every sub-layer; Keras
    resolves it by path for `quantization_mode`, but its `Dense`, `EinsumDense` and
    `Embedding` read `dtype_policy.quantization_mode` (the map's default) when they save,
    and then write no scales. Sets `Layer._dtype_policy`; a layer whose policy is no map,
    or that has no path yet, is left as it is.
    """
    policy = layer.dtype_policy
    if isinstance(policy, keras.dtype_policies.DTypePolicyMap) and layer.path:
        layer._dtype_policy = policy[layer.path]


@contextlib.contextmanager
def one_garbage_collection() -> Iterator[None]:
    """Within the block, the `gc.collect()` that Keras' `Layer.__delattr__` runs for every
    variable a layer drops (as `quantize` replaces a float kernel) is skipped; one full
    collection runs at the end instead.

    Each of those collections walks the whole heap, TensorFlow's included: they were nearly
    all the time that quantizing a small translator took (docs/performance-log.md,
    2026-11-26, "Quantizing collects garbage once").
    """
    collect = gc.collect
    gc.collect = lambda *args, **kwargs: 0
    try:
        yield
    finally:
        gc.collect = collect
        gc.collect()
