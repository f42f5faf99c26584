"""DeviceResidentTraining: batches drawn from the held training set inside the train step."""

import h5py
import keras
import numpy as np
import pytest

from zoo.training.errors import UserError
from zoo.training.augmentation import MixBatch, RandomErasing
from zoo.training.checkpointing import ResumableCheckpoint, restore_latest
from zoo.training.device_resident import DeviceResidentTraining

N, SIDE, CLASSES, BATCH = 48, 4, 3, 12


def data(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (N, SIDE, SIDE, 3)).astype("uint8"),
            rng.integers(0, CLASSES, N))


def flattening_classifier():
    """Logits are the images' pixels: what the step fed the classifier, unchanged."""
    return keras.Sequential([keras.Input((SIDE, SIDE, 3)), keras.layers.Flatten()])


def dense_classifier(seed=1):
    model = keras.Sequential([keras.Input((SIDE, SIDE, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Flatten(), keras.layers.Dense(CLASSES)])
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0, 0.1, w.shape).astype("float32")
                       for w in model.get_weights()])
    return model


def compiled(trainer):
    trainer.compile(optimizer=keras.optimizers.SGD(0.1),
                    loss=keras.losses.CategoricalCrossentropy(from_logits=True),
                    metrics=[keras.metrics.CategoricalAccuracy(name="accuracy")])
    return trainer


def test_each_step_gathers_its_slice_of_the_epochs_permutation():
    images, labels = data()
    trainer = DeviceResidentTraining(flattening_classifier(), images, labels, CLASSES, BATCH,
                                     seed=5)
    order = trainer.order(0)
    assert sorted(order) == list(range(N))  # 48 = 4 whole steps: every image once
    assert not np.array_equal(order, trainer.order(1))  # a new order every epoch
    np.testing.assert_array_equal(order, DeviceResidentTraining(
        flattening_classifier(), images, labels, CLASSES, BATCH, seed=5).order(0))
    for step in (0, 3):
        pixels, soft_labels = trainer(np.array([step], "int32"), training=True)
        rows = order[step * BATCH:(step + 1) * BATCH]
        np.testing.assert_array_equal(np.asarray(pixels),
                                      images[rows].reshape(BATCH, -1).astype("float32"))
        np.testing.assert_array_equal(np.asarray(soft_labels), np.eye(CLASSES)[labels[rows]])
    # Images (rank 4) go to the classifier unchanged: validation and prediction.
    np.testing.assert_array_equal(np.asarray(trainer(images[:2])), images[:2].reshape(2, -1))


def test_an_epoch_leaves_over_what_does_not_fill_a_step():
    images, labels = data()
    trainer = DeviceResidentTraining(flattening_classifier(), images, labels, CLASSES, 20)
    assert trainer.steps_per_epoch == 2
    assert len(set(trainer.order(0))) == 40
    np.testing.assert_array_equal(trainer.step_numbers(), [0, 1])


def test_fit_trains_exactly_as_fit_on_the_same_batches():
    """Two epochs on the device equal two epochs of plain `fit` on the arrays gathered in
    the same orders: the loss, the metrics and the updates are the ordinary ones."""
    images, labels = data()
    trainer = compiled(DeviceResidentTraining(dense_classifier(), images, labels, CLASSES,
                                              BATCH, seed=3))
    history = trainer.fit(trainer.step_numbers(), batch_size=1, shuffle=False, epochs=2,
                          verbose=0, callbacks=[trainer.new_order_every_epoch()])
    reference = dense_classifier()
    compiled(reference)
    losses = []
    for epoch in range(2):
        rows = trainer.order(epoch)
        step = reference.fit(images[rows], np.eye(CLASSES)[labels[rows]], batch_size=BATCH,
                             shuffle=False, epochs=1, verbose=0)
        losses.append(step.history["loss"][0])
    np.testing.assert_allclose(history.history["loss"], losses, rtol=1e-5)
    for got, want in zip(trainer.classifier.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_checkpoint_holds_no_data_and_resumes_the_same_run(tmp_path):
    images, labels = data()

    def trainer():
        return compiled(DeviceResidentTraining(dense_classifier(), images, labels, CLASSES,
                                               BATCH, seed=3))

    def fit(model, epochs, initial_epoch):
        model.fit(model.step_numbers(), batch_size=1, shuffle=False, epochs=epochs,
                  initial_epoch=initial_epoch, verbose=0,
                  callbacks=[model.new_order_every_epoch(),
                             ResumableCheckpoint(tmp_path / "checkpoints")])

    straight = trainer()
    fit(straight, 2, 0)
    with h5py.File(tmp_path / "checkpoints" / "epoch-0002" / "model.weights.h5") as weights:
        shapes = []
        weights.visititems(lambda name, item: shapes.append(item.shape)
                           if isinstance(item, h5py.Dataset) else None)
    assert images.shape not in shapes and (N,) not in shapes, shapes

    import shutil
    shutil.rmtree(tmp_path / "checkpoints" / "epoch-0002")
    resumed = trainer()
    assert restore_latest(resumed, tmp_path / "checkpoints") == 1
    fit(resumed, 2, 1)
    for got, want in zip(resumed.classifier.get_weights(), straight.classifier.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_augmentation_and_mixing_run_inside_the_step():
    images, labels = data()
    trainer = DeviceResidentTraining(
        flattening_classifier(), images, labels, CLASSES, BATCH, seed=0,
        augment=keras.layers.Pipeline([RandomErasing(rate=0.99, seed=1)]),
        mix=MixBatch("mixup", seed=2))
    pixels, soft_labels = (np.asarray(t) for t in trainer(np.array([0], "int32"),
                                                          training=True))
    rows = trainer.order(0)[:BATCH]
    assert not np.allclose(pixels, images[rows].reshape(BATCH, -1))
    np.testing.assert_allclose(soft_labels.sum(axis=1), 1.0, rtol=1e-6)
    assert soft_labels.max(axis=1).min() < 1.0  # mixed labels, not one-hot
    again, _ = trainer(np.array([0], "int32"), training=True)
    assert not np.allclose(np.asarray(again), pixels)  # fresh draws every step


@pytest.mark.parametrize("change, named", [
    ({"batch_size": N + 1}, "49"),
    ({"batch_size": 0}, "got 0"),
    ({"labels": np.full(N, CLASSES)}, "3..3"),
    ({"labels": np.zeros(N - 1, int)}, "(47,)"),
    ({"images": np.zeros((N, SIDE, SIDE, 3), "float32")}, "float32"),
])
def test_bad_arguments_are_one_line_naming_the_value(change, named):
    images, labels = data()
    arguments = {"images": images, "labels": labels, "batch_size": BATCH, **change}
    with pytest.raises(UserError) as raised:
        DeviceResidentTraining(flattening_classifier(), num_classes=CLASSES, **arguments)
    assert named in str(raised.value) and "\n" not in str(raised.value)


# (case, images, size, batch size, refused)
SIZES = [("ten million images at 1024 pixels", 10**7, 1024, 128, True),
         ("a small set", 64, SIDE, 8, False)]


@pytest.mark.parametrize("count, size, batch, refused", [s[1:] for s in SIZES],
                         ids=[s[0] for s in SIZES])
def test_a_training_set_the_memory_cannot_hold_is_refused_before_it_is_copied(count, size,
                                                                              batch, refused):
    # A view of one pixel: the sizes of a huge set, without its bytes.
    images = np.broadcast_to(np.zeros((1, 1, 1, 3), "uint8"), (count, size, size, 3))
    labels = np.arange(count) % 2
    if not refused:
        trainer = DeviceResidentTraining(dense_classifier(), np.ascontiguousarray(images),
                                         labels, 2, batch)
        assert trainer.steps_per_epoch == count // batch
        return
    with pytest.raises(UserError, match="^--data-placement device would allocate ") as caught:
        DeviceResidentTraining(dense_classifier(), images, labels, 2, batch)
    assert "\n" not in str(caught.value)
