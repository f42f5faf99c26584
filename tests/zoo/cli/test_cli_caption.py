"""`zoo caption`: one `path<TAB>caption` line per image, the captions `ImageCaptioner.caption`
writes for the same pixels; a missing image or a model of another kind is one line on stderr
with exit status 2."""

from __future__ import annotations

import numpy as np
import pytest

from tests.zoo.models._tiny_captioner import tiny_captioner
from zoo.cli.main import main


@pytest.fixture(scope="module")
def captioner_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("captioner")
    model = tiny_captioner(folder / "bpe", seed=5)
    model.save(folder / "captioner.keras")
    return model, folder / "captioner.keras"


def test_caption_prints_path_tab_caption_per_image(captioner_file, tmp_path, capsys):
    from PIL import Image

    model, path = captioner_file
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (32, 32, 3), dtype=np.uint8) for _ in range(2)]
    files = []
    for i, image in enumerate(images):
        files.append(str(tmp_path / f"{i}.png"))
        Image.fromarray(image).save(files[-1])
    assert main(["caption", "--model", str(path), "--beam-size", "2", "--max-length", "5",
                 *files]) == 0
    out, err = capsys.readouterr()
    expected = model.caption(np.stack(images), beam_size=2, max_length=5)
    assert out.splitlines() == [f"{f}\t{c}" for f, c in zip(files, expected)]
    assert err == ""


def test_caption_mistakes_are_one_line(captioner_file, tmp_path, capsys):
    _, path = captioner_file
    assert main(["caption", "--model", str(path), str(tmp_path / "nope.png")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"zoo: error: image file {tmp_path / 'nope.png'} does not exist")
    assert main(["caption", "--model", str(path), str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"zoo: error: image {tmp_path} is a directory, not an image file")
    from PIL import Image

    Image.new("RGB", (8, 8)).save(tmp_path / "x.png")
    assert main(["caption", "--model", str(path), "--beam-size", "65",
                 str(tmp_path / "x.png")]) == 2
    assert capsys.readouterr().err.strip() == (
        "zoo: error: beam_size must be at most 64; got 65")
