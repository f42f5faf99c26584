"""The ViT recipe end to end on real CIFAR-10 images (slow: trains small models)."""

import json
import tarfile

import numpy as np
import pytest

from zoo.training.files.archives import extract_archive
from zoo.models import architectures as presets
from zoo.cli.main import main
from zoo.recipes.vit import ViTRecipe, train_vit

MICRO = dict(image_size=32, patch_size=4, num_classes=10, hidden_dim=64, num_layers=2, num_heads=4,
             intermediate_dim=128, dropout=0.0, attention_dropout=0.0)


@pytest.fixture()
def micro_preset(monkeypatch):
    monkeypatch.setitem(presets.ARCHITECTURES, "vit-cifar-micro",
                        presets.Architecture("vit-cifar-micro", "VisionTransformer", MICRO, ""))
    return "vit-cifar-micro"


@pytest.fixture(scope="module")
def cifar_archive(shared_data, tmp_path_factory):
    """The real archive's first 21 images of each class (210) as an archive of the same name
    and layout (train/<class>/*.jpg): the recipe extracts and decodes it as it does the whole
    one, without writing 50,000 files in every test (8 s a test on a quiet 2-core machine,
    30 s on a busy one)."""
    path = shared_data / "cifar10" / "cifar10-train-jpg.tar.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    folder = tmp_path_factory.mktemp("cifar-21-per-class")
    train = extract_archive(path, folder / "extracted", limit_per_class=21) / "train"
    small = folder / path.name
    with tarfile.open(small, "w:gz") as archive:
        archive.add(train, arcname="train")
    return small


@pytest.mark.slow
def test_tiny_vit_fits_200_real_images(cifar_archive, micro_preset, tmp_path):
    """A tiny ViT trained briefly on 200 real CIFAR-10 images fits them (> 90%). (The device
    placement trains exactly as `fit` on the same batches:
    tests/training/test_device_resident.py.) From 15% in its first epoch it is at 88% in its
    16th and 100% from its 21st on."""
    recipe = ViTRecipe(output=str(tmp_path / "run"), data=str(cifar_archive),
                       limit_per_class=21, validation_size=10, architecture=micro_preset,
                       epochs=30, batch_size=25, learning_rate=3e-3, warmup_epochs=2,
                       weight_decay=0.0, label_smoothing=0.0, augment=False,
                       validate_every=30, checkpoint_every=30)
    metrics = train_vit(recipe)
    assert metrics["training_images"] == 200
    # Accuracy on the training images, measured after training (no augmentation, no dropout).
    assert metrics["history"]["accuracy"][-1] > 0.9, metrics["history"]["accuracy"][-5:]
    import keras

    model = keras.saving.load_model(tmp_path / "run" / "model.keras")
    from zoo.recipes.vit import load_images
    images, labels, _ = load_images(recipe)
    from zoo.training.image_data import train_validation_split
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
    said = capsys.readouterr().err  # each long step, a line as it starts and as it ends
    assert f"zoo: extracting {cifar_archive.name}: done in " in said
    assert "zoo: decoding 60 images from " in said
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
                 "--confusion-matrix", str(picture), "--per-class"]) == 0
    line, *classes = capsys.readouterr().out.splitlines()
    assert line.startswith("top-1 ") and "images 30" in line
    # One line a class, 3 images each; their correct answers add up to the top-1.
    rows = [c.split("\t") for c in classes]
    assert sorted(r[0] for r in rows) == sorted(p.name for p in data.iterdir())
    assert all(r[2] == "images 3" for r in rows)
    correct = sum(round(float(r[1].split()[1]) * 3) for r in rows)
    assert correct / 30 == pytest.approx(float(line.split()[1]), abs=1e-4)
    assert picture.read_bytes()[:4] == b"\x89PNG"
    image = next((data / "cat").iterdir())
    overlay = tmp_path / "attention.png"
    assert main(["classify", "--model", str(out), "--top-k", "2", "--attention", str(overlay),
                 str(image)]) == 0
    rows = [r.split("\t") for r in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2 and rows[0][0] == str(image)
    assert float(rows[0][2]) >= float(rows[1][2])
    assert overlay.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_device_placement_trains_augments_mixes_and_resumes(cifar_archive, micro_preset,
                                                            tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "vit", "--data", str(cifar_archive), "--limit-per-class", "6",
            "--validation-size", "20", "--architecture", micro_preset, "--batch-size", "16",
            "--output", str(out), "--warmup-epochs", "1", "--data-placement", "device",
            "--mix", "cutmix", "--random-erasing", "0.5", "--rand-augment-magnitude", "0.5",
            "--validate-every", "2", "--checkpoint-every", "2"]
    assert main(args + ["--epochs", "1"]) == 0
    first = json.loads((out / "metrics.json").read_text())
    assert first["recipe"]["data_placement"] == "device"
    assert first["training_images"] == 40  # 2 whole steps of 16 an epoch
    # The last epoch is validated and checkpointed whatever the cadence.
    assert first["validation_epochs"] == [1] and len(first["history"]["val_accuracy"]) == 1
    # The host placement's checkpoints differ in layout: refused in one line.
    host = ["host" if a == "device" else a for a in args]
    assert main(host + ["--epochs", "3", "--force"]) == 2
    assert "data_placement 'device', not 'host'" in capsys.readouterr().err
    assert main(args + ["--epochs", "3", "--force"]) == 0  # continued from epoch 1
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epochs_this_run"] == 2
    assert metrics["validation_epochs"] == [2, 3]
    assert len(metrics["history"]["val_accuracy"]) == 2
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["epoch-0002",
                                                                       "epoch-0003"]
    import keras

    from zoo.models.vit.model import VisionTransformer

    model = keras.saving.load_model(out / "model.keras")
    assert isinstance(model, VisionTransformer)  # the classifier, not the training wrapper
    assert 0 <= metrics["validation"]["top1"] <= 1


def test_classify_refuses_a_corrupt_file_naming_it(micro_preset, tmp_path, capsys):
    import keras

    from zoo.models.vit.model import VisionTransformer

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


@pytest.mark.slow
def test_weight_average_is_validated_resumed_and_shipped(cifar_archive, micro_preset, tmp_path,
                                                         monkeypatch):
    """With `ema_momentum` the final model holds the moving average of the weights after each
    step (computed here from the weights seen after every step, across a resume), and the
    last epoch's validation loss is the average's, not the trained weights'."""
    import keras

    import zoo.recipes.vit as recipe_module
    from zoo.training.image_data import train_validation_split

    seen: list[np.ndarray] = []
    fit = recipe_module.fit_resumably

    def recording_fit(model, *args, callbacks=None, **kwargs):
        record = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: seen.append(
            keras.ops.convert_to_numpy(model.head.kernel).copy()))
        return fit(model, *args, callbacks=[*(callbacks or []), record], **kwargs)

    monkeypatch.setattr(recipe_module, "fit_resumably", recording_fit)
    momentum = 0.6
    settings = dict(output=str(tmp_path / "run"), data=str(cifar_archive), limit_per_class=6,
                    validation_size=20, architecture=micro_preset, batch_size=20,
                    learning_rate=3e-3, warmup_epochs=0, augment=False,
                    ema_momentum=momentum)
    train_vit(ViTRecipe(epochs=1, **settings))
    metrics = train_vit(ViTRecipe(epochs=2, force=True, **settings))  # resumed at epoch 1
    assert len(seen) == 4  # 40 training images, batches of 20, 2 epochs

    average = seen[0]
    for weights in seen[1:]:
        average = momentum * average + (1 - momentum) * weights
    # The average is not the last weights (they differ by 1e-4 here), so the check below can
    # tell them apart.
    assert np.abs(seen[-1] - average).max() > 2e-5
    model = keras.saving.load_model(tmp_path / "run" / "model.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model.head.kernel), average,
                               atol=1e-6)

    recipe = ViTRecipe(epochs=2, **settings)
    images, labels, _ = recipe_module.load_images(recipe)
    _, valid_rows = train_validation_split(len(images), 20, seed=0, labels=labels)
    loss = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)(
        np.eye(10, dtype="float32")[labels[valid_rows]],
        model.predict(images[valid_rows], verbose=0))
    assert float(loss) == pytest.approx(metrics["history"]["val_loss"][-1], abs=1e-5)


def test_ema_momentum_out_of_range_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "vit", "--data", str(tmp_path), "--ema-momentum", "1.0",
              "--output", str(tmp_path / "run")])
    assert exit_.value.code == 2
    assert "argument --ema-momentum: must lie in (0, 1); got 1.0" in capsys.readouterr().err


def test_validation_epochs_are_every_nth_and_the_last():
    from zoo.recipes.vit import validation_epochs

    assert validation_epochs(ViTRecipe(epochs=10, validate_every=4)) == [4, 8, 10]
    assert validation_epochs(ViTRecipe(epochs=3)) == [1, 2, 3]
    assert validation_epochs(ViTRecipe(epochs=2, validate_every=5)) == [2]


def test_the_recipe_augments_with_its_randaugment_settings():
    from zoo.training.rand_augment import RandAugmentPolicy
    from zoo.recipes.vit import recipe_augmentation

    def policies(recipe: ViTRecipe) -> list:
        return [layer for layer in recipe_augmentation(recipe).layers
                if isinstance(layer, RandAugmentPolicy)]

    (policy,) = policies(ViTRecipe(rand_augment_magnitude=0.5, rand_augment_ops=3))
    assert (policy.magnitude, policy.num_ops) == (0.5, 3)
    (default,) = policies(ViTRecipe())
    assert (default.magnitude, default.num_ops) == (0.9, 2)
    assert policies(ViTRecipe(rand_augment=False, rand_augment_magnitude=0.5)) == []


def test_a_batch_normalised_stem_gets_precise_statistics_and_a_plain_vit_none(micro_preset,
                                                                              tmp_path):
    from zoo.models.vit.model import VisionTransformer
    from zoo.recipes.vit import precise_batch_norm
    from zoo.training.batch_norm import PreciseBatchNorm

    recipe = ViTRecipe(output=str(tmp_path), batch_size=64)
    images = np.zeros((100, 32, 32, 3), "uint8")
    plain = VisionTransformer.from_architecture(micro_preset)
    assert precise_batch_norm(plain, images, recipe) == []
    hybrid = VisionTransformer.from_architecture(micro_preset, stem_filters=[8],
                                                 stem_style="vgg")
    (callback,) = precise_batch_norm(hybrid, images, recipe)
    assert isinstance(callback, PreciseBatchNorm) and callback.target is hybrid
    assert callback.options == {"batch_size": 64, "batches": 1, "seed": 0}
    (small,) = precise_batch_norm(hybrid, images[:20], recipe)  # fewer images than a batch
    assert small.options["batch_size"] == 20 and small.options["batches"] == 1
    hybrid.stem.trainable = False  # a frozen stem normalises with the statistics it has
    assert precise_batch_norm(hybrid, images, recipe) == []
