"""Every size is bounded by what it would allocate, and every class name is one distinct
field, before a model is built: on each route to a model (the constructor, `with_new_head`,
`reset_classifier`, `from_config`, `zoo.load` of a saved model whose config was edited), one
line naming the argument, never a ResourceExhaustedError from the backend."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

import zoo
from zoo.models.argument_bounds import distinct_class_names
from zoo.models.vit.model import VisionTransformer
from zoo.training.errors import UserError
from zoo.training.memory_bounds import check_allocation, physical_memory

SMALL = dict(image_size=16, patch_size=8, num_classes=2, hidden_dim=8, num_layers=1,
             num_heads=2, intermediate_dim=8)


@pytest.fixture(scope="module")
def small():
    model = VisionTransformer(**SMALL)
    model(np.zeros((1, 16, 16, 3), "uint8"))
    return model


def _saved_with(small, tmp_path, **changes):
    """`small` saved, then its config.json edited (as a user or an attacker could)."""
    small.save(tmp_path / "small.keras")
    with zipfile.ZipFile(tmp_path / "small.keras") as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    config = json.loads(files["config.json"])
    config["config"].update(changes)
    files["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(tmp_path / "edited.keras", "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return zoo.load(str(tmp_path / "edited.keras"))


# (case, how the model is asked for, the one line's words)
ROUTES = [
    ("image_size 10^6", lambda small, tmp: VisionTransformer(**{**SMALL, "image_size": 10**6}),
     "the position embedding (image_size=(1000000, 1000000)"),
    ("num_classes 10^9", lambda small, tmp: VisionTransformer(**{**SMALL,
                                                                 "num_classes": 10**9}),
     "the classifier head (num_classes=1000000000"),
    ("with_new_head 10^9", lambda small, tmp: small.with_new_head(10**9),
     "the classifier head (num_classes=1000000000"),
    ("reset_classifier 10^9", lambda small, tmp: small.reset_classifier(10**9),
     "the classifier head (num_classes=1000000000"),
    ("from_config 10^9 layers", lambda small, tmp: VisionTransformer.from_config(
        {**small.get_config(), "num_layers": 10**9}), "the encoder (num_layers=1000000000"),
    ("zoo.load, num_classes edited", lambda small, tmp: _saved_with(small, tmp,
                                                                    num_classes=10**9),
     "the classifier head (num_classes=1000000000"),
    ("zoo.load, image_size edited", lambda small, tmp: _saved_with(small, tmp,
                                                                   image_size=10**6),
     "the position embedding"),
    ("duplicate names", lambda small, tmp: small.with_new_head(class_names=["cat", "cat"]),
     "class_names names 'cat' twice (classes 0 and 1)"),
    ("a name with a tab", lambda small, tmp: small.with_new_head(class_names=["a", "b\tc"]),
     "class_names[1] 'b\\tc' holds a tab"),
    ("a name with a newline", lambda small, tmp: VisionTransformer(
        **{**SMALL, "class_names": ["a\nb", "c"]}), "class_names[0] 'a\\nb' holds a line end"),
    ("an empty name", lambda small, tmp: small.reset_classifier(class_names=["", "c"]),
     "class_names[0] is empty"),
    ("zoo.load, names edited", lambda small, tmp: _saved_with(small, tmp,
                                                              class_names=["x", "x"]),
     "class_names names 'x' twice"),
]


@pytest.mark.parametrize("ask, said", [r[1:] for r in ROUTES], ids=[r[0] for r in ROUTES])
def test_a_size_or_name_no_model_can_have_is_one_line(small, tmp_path, ask, said):
    with pytest.raises(UserError) as refused:
        ask(small, tmp_path)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_the_bound_is_the_machines_memory_and_names_the_largest_part():
    memory = physical_memory()
    assert memory and memory > 10**8
    assert check_allocation({"a": memory // 2, "b": memory // 4}, "x") == memory // 2 + memory // 4
    with pytest.raises(UserError, match=r"^x would allocate .* the most is b: "):
        check_allocation({"a": 1, "b": memory}, "x")


def test_a_real_size_passes_and_converted_repeats_get_their_id():
    VisionTransformer(**{**SMALL, "image_size": 384, "num_classes": 1000,
                         "class_names": [f"c{i}" for i in range(1000)]})
    assert distinct_class_names(["crane", "a\tb", "crane", ""]) == [
        "crane", "a b", "crane (2)", "class_3"]
