"""One registry of architectures for every model of the zoo.

An architecture is a name for a set of constructor arguments of one model class; building it
gives a freshly initialised (untrained) model: `Translator.from_architecture(name, ...)`,
`VisionTransformer.from_architecture(name, ...)`. Trained models are loaded by
`from_preset` / `zoo.load` (a shipped name, a model file or folder, a hub handle), as in
keras-hub, where a preset means trained weights.

Architectures are declared next to their model (zoo/models/vit/architectures.py,
zoo/models/translator/architectures.py) with `register_architecture`, in the spirit of timm's
`register_model`: one entry per name, one builder per model class, and the same checks
everywhere. This module holds the registry only; what a model does to its weights (a new
head, frozen blocks, another image size) is its surgery: `zoo.models.surgery` and the
`surgery.py` beside each model.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from zoo.training.errors import UserError


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
