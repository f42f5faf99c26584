"""The flags of `zoo train` and `zoo finetune`, read from the recipe dataclasses' fields.

Every field of a recipe dataclass (zoo/recipes/settings.py) is one `--flag`: its type and
default are the field's, its help text and choices are the field's `metadata` (as
transformers' `HfArgumentParser` reads them), so that each flag is described beside the
setting it sets. A fine-tuning recipe that gives a field a new default keeps the training
recipe's help. The settings module imports no Keras: `zoo train vit --help` stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any, Sequence

from zoo.recipes.checks import Check, checked_type, field_metadata
from zoo.recipes.settings import (CausalLMFinetuneRecipe, TranslatorFinetuneRecipe,
                                  TranslatorRecipe, ViTFinetuneRecipe, ViTRecipe)

# (command, task) -> the dataclass of its recipe.
RECIPES: dict[tuple[str, str], type] = {
    ("train", "translator"): TranslatorRecipe,
    ("train", "vit"): ViTRecipe,
    ("finetune", "translator"): TranslatorFinetuneRecipe,
    ("finetune", "vit"): ViTFinetuneRecipe,
    ("finetune", "lm"): CausalLMFinetuneRecipe,
}


@dataclasses.dataclass(frozen=True)
class RecipeField:
    """One recipe setting as a flag: its name, value type, whether `None` is allowed, default,
    help text and the values it may take (None: any of its type)."""

    name: str
    kind: type
    optional: bool
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    check: Check | None = None


def _flag_type(annotation: Any) -> Any:
    """The argparse type of a dataclass field's type, such as `int | None` -> int; None for
    booleans (they become --flag/--no-flag)."""
    arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
    kind = arguments[0] if arguments else annotation
    if kind is bool:
        return None
    return kind if kind in (int, float, str) else str


def recipe_fields(recipe_class: type) -> list[RecipeField]:
    """The flags of a recipe dataclass, in field order (a base class's first).

    Args:
        recipe_class: a recipe dataclass of zoo/recipes/settings.py.

    Returns:
        One `RecipeField` per dataclass field; a field without a `help` in its metadata gets
        a generic help line.
    """
    hints = typing.get_type_hints(recipe_class)
    found = []
    for field in dataclasses.fields(recipe_class):
        metadata = field_metadata(recipe_class, field.name)
        choices = metadata.get("choices")
        found.append(RecipeField(
            name=field.name, kind=_flag_type(hints[field.name]) or bool,
            optional=type(None) in typing.get_args(hints[field.name]), default=field.default,
            help=metadata.get("help", f"recipe setting {field.name}"),
            choices=tuple(choices) if choices is not None else None,
            check=metadata.get("check")))
    return found


def fields_of_recipe(command: str, task: str) -> list[RecipeField]:
    """The flags of `zoo COMMAND TASK`."""
    return recipe_fields(RECIPES[command, task])


def add_field_flags(parser: argparse.ArgumentParser, fields: Sequence[RecipeField]) -> None:
    """Adds one `--flag` per recipe field, with its default, help text and choices."""
    for field in fields:
        flag = "--" + field.name.replace("_", "-")
        if field.kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction,
                                default=field.default, help=field.help)
        else:
            parser.add_argument(
                flag, type=checked_type(field.kind, field.check, field.optional),
                default=field.default, help=field.help, choices=field.choices)


def recipe_from_args(recipe_class: type, args: argparse.Namespace) -> Any:
    """The recipe dataclass filled from the parsed flags."""
    return recipe_class(**{f.name: getattr(args, f.name)
                           for f in dataclasses.fields(recipe_class)})
