"""`zoo convert` of the new families' checkpoints (gpt2, clip, vision-encoder-decoder: tiny
random models written by transformers with the hub tests' helpers) and of a ViT: each folder
loads with `zoo.load` as the family's class, and its README.md model card names that class,
the parameter count the loaded model has, the source and format, the checks and the license.
A checkpoint of another kind is refused in one line that names the format to use."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import zoo  # noqa: E402
from tests.zoo.clip_checkpoint import write_checkpoint  # noqa: E402
from tests.zoo.hub._hub_helpers import vit_folder  # noqa: E402
from tests.zoo.hub.test_hub_captioner import _write_captioner  # noqa: E402
from tests.zoo.hub.test_hub_gpt2 import gpt2_folder  # noqa: E402,F401  (a fixture)
from zoo.cli.main import main  # noqa: E402


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, gpt2_folder):  # noqa: F811
    """{format: (checkpoint folder, the zoo class it converts into)}."""
    root = tmp_path_factory.mktemp("checkpoints")
    captioner = root / "tiny-captioner"
    _write_captioner(captioner, 32, (0.5,) * 3, (0.5,) * 3)
    vit = root / "tiny-vit"
    vit_folder(vit, (0.5,) * 3, (0.5,) * 3)
    return {"gpt2": (gpt2_folder[0], "CausalLM"),
            "clip": (write_checkpoint(root / "tiny-clip"), "CLIP"),
            "vision-encoder-decoder": (captioner, "ImageCaptioner"),
            "hf-vit": (vit, "VisionTransformer")}


@pytest.mark.parametrize("format", ["gpt2", "clip", "vision-encoder-decoder", "hf-vit"])
def test_convert_writes_a_card_that_names_the_loaded_class_and_size(checkpoints, tmp_path,
                                                                   capsys, format):
    source, class_name = checkpoints[format]
    out = tmp_path / "converted"
    assert main(["convert", format, str(source), "--output", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out / "model.keras")
    model = zoo.load(str(out))
    assert type(model).__name__ == class_name
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"A `zoo.{class_name}` (" in card
    assert f"), {model.count_params():,} parameters." in card
    assert f"`zoo convert {format}` from `{source}`" in card
    assert "every tensor of the checkpoint was copied" in card
    assert "license applies" in card
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "manifest.json",
                                                     "model.keras"]


def test_another_kind_of_checkpoint_is_one_line_and_no_folder(checkpoints, tmp_path,
                                                              capsys):
    out = tmp_path / "models" / "lm"
    assert main(["convert", "gpt2", str(checkpoints["clip"][0]), "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "holds a clip checkpoint" in err
    assert "use zoo convert clip" in err
    assert not (tmp_path / "models").exists()
