"""The ranges of the recipes' settings: a `Check` per kind of value, the argparse type that
applies one to a flag as it is parsed, and the checks of a whole recipe made in Python.

Every number a user gives is finite and bounded by what a model can use. This module imports
nothing but the standard library and the ground floor (`zoo.training.errors`,
`zoo.layers.validation`), so that the flag checks run before Keras loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import numbers
import typing
from typing import Any, Callable

from zoo.training.errors import UserError
from zoo.layers.validation import is_int


@dataclasses.dataclass(frozen=True)
class Check:
    """The valid values of a setting: `accepts(value)`, and the requirement said when not."""

    accepts: Callable[[Any], bool]
    requirement: str  # completes "NAME ...; got VALUE", e.g. "must be a positive int"

    def problem(self, value: Any) -> str | None:
        """None when `value` is valid, else the requirement and the value."""
        try:
            valid = bool(self.accepts(value))
        except TypeError:  # a string where a number belongs, for instance
            valid = False
        return None if valid else f"{self.requirement}; got {value!r}"


# Every number a user gives is finite and bounded: a count above int32's range is no count a
# model can use (and overflows TensorFlow's int32 shapes), a rate or scale above 1e6 trains
# to NaN, and an infinite one writes Infinity into metrics.json.
MAX_COUNT = 2 ** 31 - 1
MAX_SCALE = 1e6


def _finite(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) \
        and math.isfinite(value)


POSITIVE_INT = Check(lambda v: is_int(v) and 1 <= v <= MAX_COUNT,
                     f"must be a positive int up to {MAX_COUNT}")
NON_NEGATIVE_INT = Check(lambda v: is_int(v) and 0 <= v <= MAX_COUNT,
                         f"must be an int from 0 to {MAX_COUNT}")
POSITIVE = Check(lambda v: _finite(v) and 0 < v <= MAX_SCALE,
                 f"must be a positive number up to {MAX_SCALE:g}")
NON_NEGATIVE = Check(lambda v: _finite(v) and 0 <= v <= MAX_SCALE,
                     f"must be a number from 0 to {MAX_SCALE:g}")
SEED = Check(lambda v: is_int(v) and 0 <= v <= 2 ** 32 - 1,
             f"must be an int from 0 to {2 ** 32 - 1}")
LENGTH_PENALTY = Check(lambda v: _finite(v) and 0 <= v <= 10, "must be a number from 0 to 10")
IMAGE_SIZE = Check(lambda v: is_int(v) and 1 <= v <= 4096, "must be an int from 1 to 4096")
# TF Serving reads a version folder's number as an int64.
VERSION = Check(lambda v: is_int(v) and 1 <= v <= 2 ** 63 - 1,
                f"must be a positive int up to {2 ** 63 - 1} (TF Serving's int64)")
SECONDS = Check(lambda v: _finite(v) and 0 < v <= 3600, "must be a number of seconds in "
                "(0, 3600]")
# The same bound as zoo.models.lora.MAX_ALPHA (this module imports no Keras).
LORA_ALPHA = Check(lambda v: _finite(v) and 0 < v <= 10_000,
                   "must be a positive number up to 10000")
FRACTION = Check(lambda v: 0 <= v < 1, "must lie in [0, 1)")
OPEN_FRACTION = Check(lambda v: 0 < v < 1, "must lie in (0, 1)")
DECAY = Check(lambda v: 0 < v <= 1, "must lie in (0, 1]")
MAX_LENGTH = Check(lambda v: is_int(v) and 2 <= v <= 4096, "must be an integer from 2 to 4096")
MAGNITUDE = Check(lambda v: 0 <= v <= 1, "must lie in [0, 1] (the paper's M / 10)")


def checked_type(kind: type, check: Check | None = None, optional: bool = False) -> Any:
    """An argparse type: `kind` of the text ('none' is None where `optional`), then `check`,
    so that argparse names the flag as typed: "argument --epochs: must be a positive int;
    got 0"."""
    def parse(text: str) -> Any:
        if optional and text.strip().lower() == "none":
            return None
        value = kind(text)
        problem = None if check is None else check.problem(value)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = kind.__name__  # argparse names it in "invalid int value: 'x'"
    return parse


def check_fields(recipe: Any, flags: bool = False) -> None:
    """Checks every setting of a recipe against its field's "check" and "choices".

    Args:
        recipe: a recipe dataclass of this module.
        flags: name a bad setting as its flag (`--validation-size`) rather than as the
            field (`validation_size`).

    Raises:
        zoo.UserError: the first setting out of its range, in one line.
    """
    hints = typing.get_type_hints(type(recipe))
    for field in dataclasses.fields(recipe):
        value = getattr(recipe, field.name)
        if value is None and type(None) in typing.get_args(hints[field.name]):
            continue
        metadata = field_metadata(type(recipe), field.name)
        check, choices = metadata.get("check"), metadata.get("choices")
        problem = None if check is None else check.problem(value)
        if problem is None and choices is not None and value not in choices:
            problem = f"must be one of {', '.join(choices)}; got {value!r}"
        if problem is not None:
            name = "--" + field.name.replace("_", "-") if flags else field.name
            raise UserError(f"{name} {problem}")


def check_lora_settings(recipe: Any) -> None:
    """Checks that a recipe's LoRA settings fit its other settings: `lora_rank` with a
    `model` (LoRA adapts trained weights), `lora_alpha` only with `lora_rank`, and no
    `freeze_blocks` beside it (LoRA freezes every block already).

    Raises:
        zoo.UserError: the first conflict, in one line naming the flags.
    """
    if recipe.lora_rank is None:
        if recipe.lora_alpha is not None:
            raise UserError("--lora-alpha needs --lora-rank")
        return
    if not recipe.model:
        raise UserError("--lora-rank needs --model: LoRA adapts a trained model")
    if getattr(recipe, "freeze_blocks", 0):
        raise UserError("--freeze-blocks does not combine with --lora-rank: LoRA freezes "
                        "every block already")


def field_metadata(recipe_class: type, name: str) -> typing.Mapping[str, Any]:
    """The metadata of field `name`: its own, or (a subclass that only changed its default)
    the nearest base class's."""
    for klass in recipe_class.__mro__:
        field = getattr(klass, "__dataclass_fields__", {}).get(name)
        if field is not None and field.metadata:
            return field.metadata
    return {}
