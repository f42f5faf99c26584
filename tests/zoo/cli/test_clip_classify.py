"""`zoo classify --labels` with a CLIP: the labels' probabilities as transformers' `CLIPModel`
gives them; `zoo models` lists CLIP's architectures; a ViT given labels is one line."""

from __future__ import annotations

import numpy as np
import pytest

from tests.zoo.clip_checkpoint import MEAN, STD, write_checkpoint
from zoo.cli.main import main

pytest.importorskip("transformers")


def test_models_lists_clip_architectures(capsys):
    assert main(["models"]) == 0
    kinds = {line.split("\t")[0]: line.split("\t")[1]
             for line in capsys.readouterr().out.splitlines()}
    assert kinds["clip-vit-b32"] == kinds["clip-vit-b16"] == "clip architecture (untrained)"
    assert kinds["clip-tiny"] == "clip architecture (untrained)"


@pytest.mark.slow
def test_zero_shot_lines_equal_the_reference(tmp_path, monkeypatch, capsys):
    import torch
    from PIL import Image
    from transformers import CLIPModel, CLIPTokenizer

    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "cache"))
    folder = write_checkpoint(tmp_path / "tiny-clip", seed=1)
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (2, 32, 32, 3)).astype("uint8")
    paths = []
    for i, image in enumerate(images):
        paths.append(str(tmp_path / f"image{i}.png"))
        Image.fromarray(image).save(paths[-1])
    labels = ["cat", "dog", "ship"]
    assert main(["classify", "--model", str(folder), "--labels", ",".join(labels),
                 "--top-k", "3", *paths]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]

    model = CLIPModel.from_pretrained(folder).eval()
    tokens = CLIPTokenizer.from_pretrained(folder)([f"a photo of a {x}" for x in labels],
                                                   padding="max_length", max_length=16,
                                                   return_tensors="pt")
    pixels = torch.tensor(((images / 255.0 - MEAN) / STD).transpose(0, 3, 1, 2),
                          dtype=torch.float32)
    with torch.no_grad():
        expected = model(**tokens, pixel_values=pixels).logits_per_image.softmax(-1).numpy()
    assert len(lines) == 6
    for row, path in enumerate(paths):
        mine = lines[3 * row:3 * row + 3]
        assert [line[0] for line in mine] == [path] * 3
        order = np.argsort(-expected[row], kind="stable")
        assert [line[1] for line in mine] == [labels[i] for i in order]
        np.testing.assert_allclose([float(line[2]) for line in mine], expected[row][order],
                                   atol=6e-5)


def test_bad_labels_are_one_line(tmp_path, capsys):
    from PIL import Image

    Image.fromarray(np.zeros((8, 8, 3), "uint8")).save(tmp_path / "x.png")
    assert main(["classify", "--labels", "cat,,dog", str(tmp_path / "x.png")]) == 2
    assert "--labels must be distinct, non-empty" in capsys.readouterr().err
