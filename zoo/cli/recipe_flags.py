"""The flags of `zoo train` and `zoo finetune`, read from the recipe dataclasses' fields.

Every field of a recipe dataclass (zoo/recipes/translator.py, zoo/recipes/vit.py) is one
`--flag`: its type and default are the field's, its help text and choices are the field's
`metadata` (as transformers' `HfArgumentParser` reads them), so that each flag is described
beside the setting it sets. A fine-tuning recipe that gives a field a new default keeps the
training recipe's help.

The recipe modules import Keras and TensorFlow at their top, and `zoo train vit --help` (or a
bad flag value) should load neither: `recipe_class_from_source` builds the dataclass from its
own class statement in the module's source, without running the rest of the module, and the
flags are read from that class exactly as from the imported one.
"""

from __future__ import annotations

import __future__
import argparse
import ast
import dataclasses
import importlib
import importlib.util
import sys
import types
import typing
from pathlib import Path
from typing import Any, Sequence

# (command, task) -> the module and dataclass of its recipe.
RECIPES: dict[tuple[str, str], tuple[str, str]] = {
    ("train", "translator"): ("zoo.recipes.translator", "TranslatorRecipe"),
    ("train", "vit"): ("zoo.recipes.vit", "ViTRecipe"),
    ("finetune", "translator"): ("zoo.recipes.translator", "TranslatorFinetuneRecipe"),
    ("finetune", "vit"): ("zoo.recipes.vit", "ViTFinetuneRecipe"),
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


def _flag_type(annotation: Any) -> Any:
    """The argparse type of a dataclass field's type, such as `int | None` -> int; None for
    booleans (they become --flag/--no-flag)."""
    arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
    kind = arguments[0] if arguments else annotation
    if kind is bool:
        return None
    return kind if kind in (int, float, str) else str


def _metadata(recipe_class: type, name: str) -> typing.Mapping[str, Any]:
    """The metadata of field `name`: its own, or (a subclass that only changed its default)
    the nearest base class's."""
    for klass in recipe_class.__mro__:
        field = getattr(klass, "__dataclass_fields__", {}).get(name)
        if field is not None and field.metadata:
            return field.metadata
    return {}


def recipe_fields(recipe_class: type) -> list[RecipeField]:
    """The flags of a recipe dataclass, in field order (a base class's first).

    Args:
        recipe_class: a recipe dataclass, imported or built by `recipe_class_from_source`.

    Returns:
        One `RecipeField` per dataclass field; a field without a `help` in its metadata gets
        a generic help line.
    """
    hints = typing.get_type_hints(recipe_class)
    found = []
    for field in dataclasses.fields(recipe_class):
        metadata = _metadata(recipe_class, field.name)
        choices = metadata.get("choices")
        found.append(RecipeField(
            name=field.name, kind=_flag_type(hints[field.name]) or bool,
            optional=type(None) in typing.get_args(hints[field.name]), default=field.default,
            help=metadata.get("help", f"recipe setting {field.name}"),
            choices=tuple(choices) if choices is not None else None))
    return found


def recipe_class_from_source(module: str, class_name: str) -> type | None:
    """The recipe dataclass `class_name` of `module`, built without importing the module.

    Only the class statement and those of its bases defined in the same module run, in a
    namespace that holds `dataclasses` alone (the recipe modules import Keras; their
    dataclasses need nothing but `dataclasses.field`).

    Returns:
        The dataclass, or None when that is not enough (its module is missing, or its class
        statement needs another name); the caller then imports the module.
    """
    try:
        spec = importlib.util.find_spec(module)
        source = Path(spec.origin).read_text(encoding="utf-8")  # type: ignore[union-attr, arg-type]
        tree = ast.parse(source)
    except (ImportError, AttributeError, TypeError, OSError, SyntaxError, ValueError):
        return None
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    statements: list[ast.stmt] = []

    def add(name: str) -> None:  # a class after its bases
        for base in classes[name].bases:
            if isinstance(base, ast.Name) and base.id in classes:
                add(base.id)
        if classes[name] not in statements:
            statements.append(classes[name])

    # The classes run in a module of their own, not under the recipe module's name (that
    # stays free for the real module's import); `dataclasses.dataclass` looks their module up
    # in sys.modules while it reads the string annotations, so it is registered meanwhile.
    stand_in = types.ModuleType(f"{module}:recipe-classes")
    stand_in.dataclasses = dataclasses  # type: ignore[attr-defined]
    sys.modules[stand_in.__name__] = stand_in
    try:
        add(class_name)
        code = compile(ast.Module(body=statements, type_ignores=[]), spec.origin, "exec",
                       flags=__future__.annotations.compiler_flag, dont_inherit=True)
        exec(code, stand_in.__dict__)  # noqa: S102 - the zoo's own class statements only
    # Whatever stops the class statements from running alone (a NameError, most likely) only
    # means that the module must be imported.
    except Exception:  # noqa: BLE001
        return None
    finally:
        del sys.modules[stand_in.__name__]
    recipe_class = getattr(stand_in, class_name, None)
    return recipe_class if dataclasses.is_dataclass(recipe_class) else None


def recipe_fields_from_source(module: str, class_name: str) -> list[RecipeField] | None:
    """The flags of a recipe dataclass without importing its module (see
    `recipe_class_from_source`); None when the class cannot be built that way."""
    recipe_class = recipe_class_from_source(module, class_name)
    return None if recipe_class is None else recipe_fields(recipe_class)


def fields_of_recipe(command: str, task: str) -> list[RecipeField]:
    """The flags of `zoo COMMAND TASK`: read without importing the recipe module, or (failing
    that) from the imported dataclass, with TensorFlow's start-up chatter filtered."""
    from zoo.cli.quiet import filtered_stderr, verbose_requested

    module, class_name = RECIPES[command, task]
    fields = recipe_fields_from_source(module, class_name)
    if fields is None:
        with filtered_stderr(verbose_requested(sys.argv)):
            fields = recipe_fields(getattr(importlib.import_module(module), class_name))
    return fields


def _optional(kind: type) -> Any:
    """An argparse type that reads 'none' as None and anything else as `kind`."""
    def parse(text: str) -> Any:
        return None if text.strip().lower() == "none" else kind(text)

    parse.__name__ = kind.__name__  # argparse names it in "invalid int value: 'x'"
    return parse


def add_field_flags(parser: argparse.ArgumentParser, fields: Sequence[RecipeField]) -> None:
    """Adds one `--flag` per recipe field, with its default, help text and choices."""
    for field in fields:
        flag = "--" + field.name.replace("_", "-")
        if field.kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction,
                                default=field.default, help=field.help)
        else:
            parser.add_argument(flag, type=_optional(field.kind) if field.optional
                                else field.kind, default=field.default, help=field.help,
                                choices=field.choices)


def recipe_from_args(recipe_class: type, args: argparse.Namespace) -> Any:
    """The recipe dataclass filled from the parsed flags."""
    return recipe_class(**{f.name: getattr(args, f.name)
                           for f in dataclasses.fields(recipe_class)})
