"""One registry of architectures for every model of the zoo.

An architecture is a name for a set of constructor arguments of one model class; building it
gives a freshly initialised (untrained) model: `Translator.from_architecture(name, ...)`,
`VisionTransformer.from_architecture(name, ...)`. Trained models are loaded by
`from_preset` / `zoo.load` (a shipped name, a model file or folder, a hub handle), as in
keras-hub, where a preset means trained weights.

Architectures are declared next to their model (zoo/models/vit/architectures.py, zoo/models/translator/model.py) with
`register_architecture`, in the spirit of timm's `register_model`: one entry per name, one
builder per model class, and the same checks everywhere.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

from zoo.errors import UserError


@dataclasses.dataclass(frozen=True)
class Architecture:
    """A named set of constructor arguments of one model class."""

    name: str
    model: str  # the model class's name, e.g. "VisionTransformer"
    config: dict[str, Any]
    description: str


ARCHITECTURES: dict[str, Architecture] = {}
"""Every registered architecture by name (filled by `register_architecture`)."""


def register_architecture(model: str, name: str, description: str, **config: Any) -> None:
    """Declares an architecture of `model` (a class name); a name is taken only once.

    Raises:
        ValueError: if `name` is already registered.
    """
    if name in ARCHITECTURES:
        raise ValueError(f"architecture {name!r} is already registered")
    ARCHITECTURES[name] = Architecture(name, model, dict(config), description)


def architectures(model: str | None = None) -> dict[str, Architecture]:
    """The registered architectures (of one model class when `model` is given), by name."""
    return {name: a for name, a in sorted(ARCHITECTURES.items())
            if model is None or a.model == model}


def architecture_config(cls: type, name: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The constructor arguments of `cls` for architecture `name`, with `overrides` applied.

    Args:
        cls: the model class (its `__name__` is the registry's model name).
        name: an architecture registered for `cls`.
        overrides: constructor arguments that replace the architecture's.

    Returns:
        A new dict of constructor arguments.

    Raises:
        ValueError: for a name that is no architecture of `cls` (the message lists those
            that are), or an override that `cls.__init__` does not take.
    """
    known = architectures(cls.__name__)
    if name not in known:
        raise UserError(f"unknown {cls.__name__} architecture {name!r}; expected one of: "
                        f"{', '.join(known)}")
    parameters = inspect.signature(cls.__init__).parameters
    accepted = [p for p, v in parameters.items()
                if p != "self" and v.kind not in (v.VAR_KEYWORD, v.VAR_POSITIONAL)]
    accepted += ["name", "dtype"]
    unknown = sorted(set(overrides) - set(accepted))
    if unknown:
        raise UserError(f"unknown {cls.__name__} argument(s) {unknown}; expected some of "
                        f"{accepted}")
    return {**known[name].config, **overrides}


def load_preset(cls: type, name: str, **head: Any) -> Any:
    """A trained model of class `cls`: a shipped name, a model file or folder, a URL or a hub
    handle (`zoo.load(name, expect=cls, **head)`; `head`: a ViT's `num_classes` and
    `class_names`).

    Raises:
        ValueError: `name` is an architecture (untrained: the message says how to build it),
            or names a model of another class.
    """
    if name in ARCHITECTURES:
        raise UserError(
            f"{name!r} is an architecture, not trained weights: build an untrained model with "
            f"{cls.__name__}.from_architecture({name!r}, ...), or give from_preset a shipped "
            "name (zoo models), a model file or a hub handle")
    # The one upward import of the house (tests/zoo/test_import_direction.py): the loader
    # builds models from this module, so it is imported here, on use, to avoid a cycle, as
    # keras-hub's `from_preset` reaches its preset loader.
    from zoo.hub.loader import load

    return load(name, expect=cls, **head)


def training_option_changes(dropout: float | None = None, attention_dropout: float | None = None,
                            dtype: Any = None) -> dict[str, Any]:
    """The config changes that give a trained model other dropout rates or another dtype
    policy (for `with_training_options`); `None` leaves a setting as it is.

    Raises:
        UserError: a rate outside [0, 1), naming it.
    """
    import keras  # here, so that `zoo --help` reads the architectures without Keras

    changes: dict[str, Any] = {}
    for name, rate in (("dropout", dropout), ("attention_dropout", attention_dropout)):
        if rate is not None:
            if not 0.0 <= float(rate) < 1.0:
                raise UserError(f"{name} must lie in [0, 1); got {rate!r}")
            changes[name] = float(rate)
    if dtype is not None:
        changes["dtype"] = keras.dtype_policies.serialize(keras.dtype_policies.get(dtype))
    return changes


def copy_weights(source: Any, target: Any,
                 convert: Callable[[Any, Any], Any] | None = None) -> None:
    """Assigns every weight of `source` to the weight of `target` in the same position (two
    models of one architecture, built; for `with_training_options` and the like).

    Args:
        source: the model whose weights are read.
        target: the model whose weights are assigned, cast to their own dtype.
        convert: optional `convert(old, new)`, returning the value for `new` to take instead
            of `old` (e.g. a position table interpolated to another grid), or None.

    Raises:
        ValueError: the models have different numbers of weights, or a weight's shape
            differs and `convert` gave no value for it.
    """
    from keras import ops

    for old, new in zip(source.weights, target.weights, strict=True):
        value = convert(old, new) if convert is not None else None
        if value is None:
            if tuple(old.shape) != tuple(new.shape):
                raise ValueError(f"cannot copy weight {old.path} of shape "
                                 f"{tuple(old.shape)} to {new.path} of shape {tuple(new.shape)}")
            value = old
        new.assign(ops.cast(value, new.dtype))


def in_run_options(model: Any, dropout: float | None = None) -> Any:
    """A trained model ready to train further in this run: `model` itself, or its copy
    (`with_training_options`) in the global dtype policy (a model is saved with its own,
    often float32) and with `dropout` where it is given."""
    import keras

    policy = keras.config.dtype_policy()
    if dropout is None and model.dtype_policy.name == policy.name:
        return model
    return model.with_training_options(dropout=dropout, dtype=policy)
