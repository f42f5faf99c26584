"""The ViT recipe end to end on real CIFAR-10 images (slow: trains small models)."""

import json

import numpy as np
import pytest

from zoo import presets
from zoo.cli import main
from zoo.vit_recipe import ViTRecipe, train_vit

MICRO = dict(image_size=32, patch_size=4, num_classes=10, hidden_dim=64, num_layers=2, num_heads=4,
             intermediate_dim=128, dropout=0.0, attention_dropout=0.0)


@pytest.fixture()
def micro_preset(monkeypatch):
    monkeypatch.setitem(presets.ARCHITECTURES, "vit-cifar-micro",
                        presets.Architecture("vit-cifar-micro", "VisionTransformer", MICRO, ""))
    return "vit-cifar-micro"


@pytest.fixture(scope="module")
def cifar_archive(shared_data):
    path = shared_data / "cifar10" / "cifar10-train-jpg.tar.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


@pytest.mark.slow
def test_tiny_vit_fits_200_real_images(cifar_archive, micro_preset, tmp_path):
    """A tiny ViT trained briefly on 200 real CIFAR-10 images fits them (> 90%)."""
    recipe = ViTRecipe(output=str(tmp_path / "run"), data=str(cifar_archive),
                       limit_per_class=21, validation_size=10, architecture=micro_preset,
                       epochs=60, batch_size=25, learning_rate=3e-3, warmup_epochs=2,
                       weight_decay=0.0, label_smoothing=0.0, augment=False)
    metrics = train_vit(recipe)
    assert metrics["training_images"] == 200
    # Accuracy on the training images, measured after training (no augmentation, no dropout).
    assert metrics["history"]["accuracy"][-1] > 0.9, metrics["history"]["accuracy"][-5:]
    import keras

    model = keras.saving.load_model(tmp_path / "run" / "model.keras")
    from zoo.vit_recipe import load_images
    images, labels, _ = load_images(recipe)
    from training.image_data import train_validation_split
    train_rows, _ = train_validation_split(len(images), 10, seed=0, labels=labels)
    predicted = np.argmax(model.predict(images[train_rows], verbose=0), axis=1)
    assert np.mean(predicted == labels[train_rows]) > 0.9


@pytest.mark.slow
def test_train_resume_evaluate_classify_end_to_end(cifar_archive, micro_preset, tmp_path,
                                                  capsys):
    out = tmp_path / "run"
    args = ["train", "vit", "--data", str(cifar_archive), "--limit-per-class", "6",
            "--validation-size", "20", "--architecture", micro_preset, "--batch-size", "20",
            "--output", str(out), "--warmup-epochs", "1", "--no-rand-augment"]
    assert main(args + ["--epochs", "1"]) == 0
    assert main(args + ["--epochs", "2", "--force"]) == 0  # the same run, continued
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epochs_this_run"] == 1
    capsys.readouterr()
    data = tmp_path / "eval"
    for folder in sorted((out / "data" / "train").iterdir()):
        (data / folder.name).mkdir(parents=True)
        for image in sorted(folder.iterdir())[:3]:
            (data / folder.name / image.name).write_bytes(image.read_bytes())
    picture = tmp_path / "confusion.png"
    assert main(["evaluate", "vit", "--model", str(out), "--data", str(data),
                 "--confusion-matrix", str(picture)]) == 0
    line = capsys.readouterr().out
    assert line.startswith("top-1 ") and "images 30" in line
    assert picture.read_bytes()[:4] == b"\x89PNG"
    image = next((data / "cat").iterdir())
    overlay = tmp_path / "attention.png"
    assert main(["classify", "--model", str(out), "--top-k", "2", "--attention", str(overlay),
                 str(image)]) == 0
    rows = [r.split("\t") for r in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2 and rows[0][0] == str(image)
    assert float(rows[0][2]) >= float(rows[1][2])
    assert overlay.read_bytes()[:4] == b"\x89PNG"


def test_classify_refuses_a_corrupt_file_naming_it(micro_preset, tmp_path, capsys):
    import keras

    from zoo.vit import VisionTransformer

    model = VisionTransformer.from_architecture(micro_preset, num_classes=3,
                                          class_names=["a", "b", "c"])
    model(np.zeros((1, 32, 32, 3), "uint8"))
    model.save(tmp_path / "model.keras")
    bad = tmp_path / "notes.jpg"
    bad.write_text("not an image")
    assert main(["classify", "--model", str(tmp_path / "model.keras"), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zoo: error:") and str(bad) in err
    assert keras is not None
