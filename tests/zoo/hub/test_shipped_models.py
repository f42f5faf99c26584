"""The models in saved_models/ load offline by name and do their job."""

import hashlib
from pathlib import Path

import numpy as np
import pytest

import zoo
from tests.zoo.conftest import read_gz
from zoo.training.translation_metrics import corpus_scores
from zoo.hub import loader as registry


def _shipped(name):
    if name not in zoo.list_models():
        pytest.skip(f"{name} is not in {registry.MODELS_DIR}")
    return zoo.load(name)


def test_manifests_match_their_files():
    models = zoo.list_models()
    assert "translator-multi30k-en-de" in models
    for name, info in models.items():
        assert info["sha256"] == hashlib.sha256(Path(info["path"]).read_bytes()).hexdigest(), name
        assert (registry.MODELS_DIR / name / "README.md").exists(), f"{name} has no model card"


def test_shipped_translator_translates(shared_data):
    model = _shipped("translator-multi30k-en-de")
    (german,) = model.translate(["A man is riding a bicycle."], beam_size=4)
    assert "Mann" in german and "Fahrrad" in german
    sources = read_gz(shared_data / "multi30k" / "test_2016_flickr.en.gz", 100)
    references = read_gz(shared_data / "multi30k" / "test_2016_flickr.de.gz", 100)
    # The model card reports 38.36 BLEU on these 100 sentences (38.88 on all 1,000), beam 4;
    # the bar is 2 points under the slice's figure.
    assert corpus_scores(model.translate(sources, beam_size=4), references)["bleu"] > 36.36


def held_out_cifar10(shared_data, per_class: int):
    """The first `per_class` images of each class among the 5,000 that the vit-cifar10 run
    held out for validation (`train_validation_split(..., 5000, seed=0, labels=...)` over the
    archive's images in `scan_image_folder` order, as `zoo train vit` splits them): images the
    shipped model never trained on. Returns uint8 images, int labels and the class names."""
    from zoo.training.files.archives import extract_archive
    from zoo.training.image_data import train_validation_split
    from zoo.training.image_files import load_image, scan_image_folder

    folder = extract_archive(shared_data / "cifar10" / "cifar10-train-jpg.tar.gz")
    paths, labels, names = scan_image_folder(folder / "train")
    _, validation = train_validation_split(len(paths), 5000, seed=0, labels=labels)
    rows = np.concatenate([validation[labels[validation] == c][:per_class]
                           for c in range(len(names))])
    images = np.stack([load_image(paths[i], (32, 32)) for i in rows])
    return images, labels[rows], names


# The model cards report these top-1 figures on the test's 1,000 held-out images (81.06% and
# 83.18% on all 5,000); each bar is 2 points under its model's slice figure.
SLICE_BARS = {"vit-cifar10": 0.782, "vit-hybrid-cifar10": 0.801}


@pytest.mark.parametrize("name", sorted(SLICE_BARS))
def test_shipped_vit_classifies_held_out_images(shared_data, name):
    model = _shipped(name)
    images, labels, names = held_out_cifar10(shared_data, per_class=100)
    assert list(model.class_names) == names
    predicted = np.argmax(model.predict(images, batch_size=250, verbose=0), axis=1)
    assert np.mean(predicted == labels) > SLICE_BARS[name]


def test_manifests_name_their_preset_and_architecture():
    from zoo.models.architectures import architectures
    import zoo.models.translator.architectures  # noqa: F401
    import zoo.models.vit.architectures  # noqa: F401

    for name, info in zoo.list_models().items():
        assert info["preset"] == name
        assert info["architecture"] in architectures(), name
    shipped = zoo.list_models()
    if "vit-cifar10" in shipped:  # a patch ViT with a class token, by name and by manifest
        assert not shipped["vit-cifar10"]["hybrid"]
        config = architectures()[shipped["vit-cifar10"]["architecture"]].config
        assert not any(key.startswith("stem") for key in config)
    if "vit-hybrid-cifar10" in shipped:
        assert shipped["vit-hybrid-cifar10"]["hybrid"]
        config = architectures()[shipped["vit-hybrid-cifar10"]["architecture"]].config
        assert any(key.startswith("stem") for key in config)
