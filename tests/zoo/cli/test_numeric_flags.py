"""Every number a user types is finite and bounded: each numeric flag of the `zoo` command,
given NaN, infinity, -1 or a huge value, is refused as it is parsed, in one line naming the
flag, with exit status 2 (before any model or data loads). One row per flag; the columns are
the bad values. (`translate --max-length` is bounded by the model's own length, a check
tests/zoo/cli/test_cli_bad_input.py makes.)"""

from __future__ import annotations

import dataclasses
import math

import pytest

from zoo.cli.parser import build_parser
from zoo.cli.recipe_flags import fields_of_recipe
from zoo.recipes.checks import check_fields
from zoo.recipes.settings import TranslatorRecipe, ViTRecipe

BAD_VALUES = ["nan", "inf", "-inf", "-1", "1e300", "99999999999999999999999"]

# (the command before the flag, the flag); the command is otherwise complete.
OTHER_FLAGS = [
    (["translate"], "--beam-size"),
    (["classify", "x.png"], "--top-k"),
    (["caption", "x.png"], "--beam-size"),
    (["caption", "x.png"], "--max-length"),
    (["evaluate", "translator", "--model", "m", "--source", "s", "--reference", "r"],
     "--beam-size"),
    (["export", "m", "--output", "d"], "--version"),
    (["export", "m", "--output", "d"], "--beam-size"),
    (["export", "m", "--output", "d"], "--alpha"),
    (["export", "m", "--output", "d"], "--top-k"),
    (["convert", "timm-vit", "x", "--output", "d"], "--num-heads"),
    (["convert", "timm-vit", "x", "--output", "d"], "--image-size"),
    (["bench"], "--rounds"),
    (["bench"], "--seconds"),
]


def _recipe_flags() -> list[tuple[list[str], str]]:
    rows = []
    for command in ("train", "finetune"):
        for task in ("translator", "vit"):
            for field in fields_of_recipe(command, task):
                if field.kind in (int, float):
                    rows.append(([command, task], "--" + field.name.replace("_", "-")))
    return rows


ALL_FLAGS = OTHER_FLAGS + _recipe_flags()


def test_the_table_covers_every_numeric_recipe_field():
    names = {flag for _, flag in ALL_FLAGS}
    for recipe in (TranslatorRecipe, ViTRecipe):
        for field in dataclasses.fields(recipe):
            if field.type in ("int", "float", "int | None", "float | None"):
                assert "--" + field.name.replace("_", "-") in names


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("command,flag", ALL_FLAGS,
                         ids=[" ".join(c[:2]) + " " + f for c, f in ALL_FLAGS])
def test_a_non_finite_negative_or_huge_number_is_refused_naming_the_flag(command, flag, value,
                                                                        capsys):
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(command + [f"{flag}={value}"])
    assert caught.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {flag}" in last, last
    assert "Traceback" not in last


def test_export_takes_any_int64_version_and_no_more():
    parser = build_parser()
    top = 2 ** 63 - 1
    assert parser.parse_args(["export", "m", "--output", "d", "--version", str(top)]).version \
        == top
    with pytest.raises(SystemExit):
        parser.parse_args(["export", "m", "--output", "d", "--version", str(top + 1)])


@pytest.mark.parametrize("field,value", [("lora_alpha", math.inf), ("learning_rate", math.nan),
                                         ("weight_decay", math.inf), ("seed", 2 ** 40),
                                         ("clipnorm", -math.inf)])
def test_a_recipe_made_in_python_is_checked_the_same(field, value):
    recipe = dataclasses.replace(ViTRecipe(), **{field: value})
    with pytest.raises(ValueError, match=f"^--{field.replace('_', '-')} "):
        check_fields(recipe, flags=True)
