"""Learning-rate schedules against the formulas they implement."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
from keras import ops

from zoo.training.schedules import InverseSqrtWarmup, WarmupCosine


def _value(schedule, iterations: int) -> float:
    return float(ops.convert_to_numpy(schedule(iterations)))


def _paper_rate(d_model: int, warmup: int, step: int, scale: float = 1.0) -> float:
    # Section 5.3 of "Attention Is All You Need", step counted from 1.
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize("step", [1, 2, 100, 3999, 4000, 4001, 10_000, 100_000])
def test_inverse_sqrt_warmup_matches_the_paper(step):
    schedule = InverseSqrtWarmup(d_model=512, warmup_steps=4000)
    # The optimizer's iterations counter is 0 on the first update: step = iterations + 1.
    np.testing.assert_allclose(_value(schedule, step - 1), _paper_rate(512, 4000, step), rtol=1e-5)


def test_inverse_sqrt_warmup_peaks_at_the_end_of_warmup():
    schedule = InverseSqrtWarmup(d_model=512, warmup_steps=4000)
    rates = np.array([_value(schedule, i) for i in range(0, 12_000, 50)])
    assert abs(int(np.argmax(rates)) * 50 - 3999) <= 50
    # The widely quoted peak of the base model: 512^-0.5 * 4000^-0.5 = 6.988e-4.
    np.testing.assert_allclose(_value(schedule, 3999), 6.98771e-4, rtol=1e-4)
    assert _value(schedule, 3999) > _value(schedule, 3998)
    assert _value(schedule, 3999) > _value(schedule, 4000)


def test_inverse_sqrt_warmup_scale_multiplies():
    base = InverseSqrtWarmup(d_model=256, warmup_steps=100)
    doubled = InverseSqrtWarmup(d_model=256, warmup_steps=100, scale=2.0)
    for i in (0, 50, 99, 500):
        np.testing.assert_allclose(_value(doubled, i), 2 * _value(base, i), rtol=1e-6)


def test_warmup_cosine_at_chosen_steps():
    peak, final, warmup, total = 1e-3, 1e-5, 10, 110
    schedule = WarmupCosine(peak, total_steps=total, warmup_steps=warmup, final_learning_rate=final)
    np.testing.assert_allclose(_value(schedule, 0), peak / warmup, rtol=1e-5)
    np.testing.assert_allclose(_value(schedule, 4), peak * 5 / warmup, rtol=1e-5)
    np.testing.assert_allclose(_value(schedule, warmup - 1), peak, rtol=1e-5)
    # Half way through the cosine the rate is the mean of peak and final.
    np.testing.assert_allclose(_value(schedule, 59), (peak + final) / 2, rtol=1e-5)
    # A quarter of the way: final + (peak - final) * (1 + cos(pi/4)) / 2.
    quarter = final + (peak - final) * (1 + math.cos(math.pi / 4)) / 2
    np.testing.assert_allclose(_value(schedule, 34), quarter, rtol=1e-5)
    np.testing.assert_allclose(_value(schedule, total - 1), final, rtol=1e-5)
    np.testing.assert_allclose(_value(schedule, 10 * total), final, rtol=1e-5)


def test_warmup_cosine_peaks_at_warmup_and_never_rises_after():
    schedule = WarmupCosine(5e-4, total_steps=200, warmup_steps=20)
    rates = np.array([_value(schedule, i) for i in range(250)])
    assert int(np.argmax(rates)) == 19
    np.testing.assert_allclose(rates.max(), 5e-4, rtol=1e-6)
    assert np.all(np.diff(rates[19:]) <= 1e-12)
    assert np.all(np.diff(rates[:20]) > 0)


def test_warmup_cosine_without_warmup_starts_at_the_peak():
    schedule = WarmupCosine(1e-3, total_steps=100, warmup_steps=0)
    expected = 1e-3 * (1 + math.cos(math.pi / 100)) / 2
    np.testing.assert_allclose(_value(schedule, 0), expected, rtol=1e-5)


@pytest.mark.parametrize(
    "schedule",
    [
        InverseSqrtWarmup(d_model=128, warmup_steps=300, scale=2.0),
        WarmupCosine(3e-3, total_steps=1000, warmup_steps=50, final_learning_rate=1e-5),
    ],
    ids=["inverse_sqrt", "cosine"],
)
def test_serialization_round_trip(schedule, tmp_path):
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert type(restored) is type(schedule)
    assert restored.get_config() == schedule.get_config()
    # Through an optimizer, as a compiled model's .keras file stores it.
    optimizer = keras.optimizers.Adam(learning_rate=schedule)
    reloaded = keras.optimizers.Adam.from_config(optimizer.get_config())
    for i in (0, 49, 299, 700):
        reloaded.iterations.assign(i)
        rate = float(ops.convert_to_numpy(reloaded.learning_rate))
        assert rate == pytest.approx(_value(schedule, i), rel=1e-6)

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=optimizer, loss="mse")
    optimizer.build(model.trainable_variables)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    loaded_schedule = loaded.optimizer.get_config()["learning_rate"]
    assert loaded_schedule["class_name"] == type(schedule).__name__
    assert loaded_schedule["config"] == schedule.get_config()


@pytest.mark.parametrize(
    "make",
    [
        lambda: InverseSqrtWarmup(d_model=0),
        lambda: InverseSqrtWarmup(d_model=512, warmup_steps=0),
        lambda: WarmupCosine(1e-3, total_steps=10, warmup_steps=10),
        lambda: WarmupCosine(-1.0, total_steps=10, warmup_steps=1),
        lambda: WarmupCosine(1e-3, total_steps=10, warmup_steps=1, final_learning_rate=1.0),
    ],
)
def test_bad_arguments_raise_value_error(make):
    with pytest.raises(ValueError):
        make()


@pytest.mark.parametrize("warmup, final", [(0, 0.0), (3, 0.0), (5, 1e-4)])
def test_warmup_cosine_is_keras_cosine_decay_one_step_on(warmup, final):
    """The schedule is Keras's `CosineDecay` with its warm-up, called at iterations + 1, so
    that the first update does not get Keras's rate of 0 at step 0."""
    peak, total = 1e-3, 20
    ours = WarmupCosine(peak, total_steps=total, warmup_steps=warmup, final_learning_rate=final)
    keras_own = keras.optimizers.schedules.CosineDecay(
        0.0 if warmup else peak, decay_steps=total - warmup, alpha=final / peak,
        warmup_target=peak if warmup else None, warmup_steps=warmup)
    for step in range(total + 3):
        assert float(ours(step)) == pytest.approx(float(keras_own(step + 1)), rel=1e-6)
    if warmup:
        assert float(keras_own(0)) == 0.0 and float(ours(0)) == pytest.approx(peak / warmup)
    again = WarmupCosine.from_config(ours.get_config())
    assert [float(again(s)) for s in range(total)] == [float(ours(s)) for s in range(total)]
