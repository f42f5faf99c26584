"""The Transformer's Adam, and AdamW that leaves norms, biases and embeddings undecayed."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

from zoo.training.optimizers import SelectiveDecayAdamW, adamw_no_decay_on_norms, transformer_adam
from zoo.training.schedules import InverseSqrtWarmup


class _ClassToken(keras.layers.Layer):
    """Prepends a learned token, like a ViT's class token."""

    def build(self, input_shape):
        self.class_token = self.add_weight(shape=(1, 1, input_shape[-1]), name="class_token")

    def call(self, x):
        token = ops.broadcast_to(self.class_token, (ops.shape(x)[0], 1, ops.shape(x)[-1]))
        return ops.concatenate([token, x], axis=1)


class _AddPositions(keras.layers.Layer):
    """Adds learned position embeddings."""

    def build(self, input_shape):
        self.position_embeddings = self.add_weight(
            shape=tuple(input_shape[1:]), name="position_embeddings"
        )

    def call(self, x):
        return x + self.position_embeddings


def _small_vit_like_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4, 6))
    x = keras.layers.Dense(8, name="patch_projection")(inputs)
    x = _ClassToken(name="cls")(x)
    x = _AddPositions(name="positions")(x)
    x = keras.layers.LayerNormalization(name="layer_norm")(x)
    x = keras.layers.Dense(3, name="head")(x[:, 0])
    return keras.Model(inputs, x)


DECAYED = {"patch_projection/kernel", "head/kernel"}


def _by_path(model: keras.Model) -> dict[str, np.ndarray]:
    return {v.path: np.array(ops.convert_to_numpy(v)) for v in model.trainable_variables}


def _check_decay(before: dict, after: dict, factor: float) -> None:
    assert len(before) == 8, sorted(before)
    for path, value in before.items():
        if any(path.endswith(name) for name in DECAYED):
            np.testing.assert_allclose(after[path], value * factor, rtol=1e-6, atol=1e-7)
            assert not np.allclose(after[path], value)
        else:
            np.testing.assert_array_equal(after[path], value, err_msg=path)


def test_zero_gradient_step_decays_only_weight_matrices():
    model = _small_vit_like_model()
    lr, wd = 0.1, 0.5
    optimizer = adamw_no_decay_on_norms(lr, weight_decay=wd)
    assert isinstance(optimizer, keras.optimizers.AdamW)
    before = _by_path(model)
    # Adam's step is m / (sqrt(v) + eps) = 0 for zero gradients: only the decay acts.
    zeros = [np.zeros(v.shape, "float32") for v in model.trainable_variables]
    optimizer.apply_gradients(zip(zeros, model.trainable_variables))
    _check_decay(before, _by_path(model), 1 - lr * wd)


def test_fit_step_decays_only_weight_matrices():
    model = _small_vit_like_model()
    lr, wd = 0.1, 0.5
    model.compile(
        optimizer=adamw_no_decay_on_norms(lr, weight_decay=wd),
        loss=lambda y_true, y_pred: 0.0 * ops.sum(y_pred),
    )
    before = _by_path(model)
    x = np.ones((2, 4, 6), "float32")
    model.fit(x, np.zeros((2, 3), "float32"), epochs=1, batch_size=2, verbose=0)
    _check_decay(before, _by_path(model), 1 - lr * wd)


def test_plain_keras_name_matching_would_miss_the_layer_norm():
    # Why SelectiveDecayAdamW exists: Keras variable names hold no layer name.
    model = _small_vit_like_model()
    names = {v.name for v in model.trainable_variables}
    assert not any("norm" in name for name in names)
    assert any("norm" in v.path for v in model.trainable_variables)


def test_selective_decay_adamw_config_round_trip():
    optimizer = adamw_no_decay_on_norms(
        1e-3, weight_decay=0.1, clipnorm=1.0, no_decay_keywords=["x"]
    )
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(optimizer))
    assert isinstance(restored, SelectiveDecayAdamW)
    assert restored.no_decay_keywords == ("x",)
    assert restored.weight_decay == pytest.approx(0.1)
    assert restored.global_clipnorm == pytest.approx(1.0)


def test_transformer_adam_has_the_papers_hyper_parameters():
    optimizer = transformer_adam(d_model=512, warmup_steps=4000, clipnorm=1.0)
    assert isinstance(optimizer, keras.optimizers.Adam)
    assert optimizer.beta_1 == 0.9 and optimizer.beta_2 == 0.98 and optimizer.epsilon == 1e-9
    assert optimizer.global_clipnorm == 1.0
    config = optimizer.get_config()["learning_rate"]
    assert config["class_name"] == "InverseSqrtWarmup"
    assert config["config"] == InverseSqrtWarmup(512, 4000).get_config()
    # The first update uses step 1 of the paper's schedule: 512^-0.5 * 4000^-1.5.
    np.testing.assert_allclose(
        float(ops.convert_to_numpy(optimizer.learning_rate)), 512**-0.5 * 4000**-1.5, rtol=1e-5
    )
    assert transformer_adam(d_model=64).global_clipnorm is None


def test_transformer_adam_clips_the_global_norm():
    variable = keras.Variable(np.zeros(2, "float32"))
    optimizer = transformer_adam(d_model=4, warmup_steps=1, clipnorm=1.0, epsilon=0.0)
    # Adam's first step is lr * g / |g| per coordinate whatever the scale of g, so compare
    # the first moment, which sees the clipped gradient: (1 - beta_1) * g_clipped.
    optimizer.apply_gradients([(ops.convert_to_tensor([30.0, 40.0]), variable)])
    momentum = [v for v in optimizer.variables if "momentum" in v.path][0]
    np.testing.assert_allclose(ops.convert_to_numpy(momentum), [0.1 * 0.6, 0.1 * 0.8], rtol=1e-5)


def test_negative_weight_decay_is_rejected():
    with pytest.raises(ValueError, match="weight_decay"):
        adamw_no_decay_on_norms(1e-3, weight_decay=-0.1)


def test_learning_rate_multipliers_scale_the_decay_per_variable():
    model = _small_vit_like_model()
    lr, wd = 0.1, 0.5
    # A key matches the path or its tail: "head/kernel" names the head's kernel only.
    optimizer = adamw_no_decay_on_norms(lr, weight_decay=wd, learning_rate_multipliers={
        "patch_projection/kernel": 0.5, "head/kernel": 0.0})
    before = _by_path(model)
    zeros = [np.zeros(v.shape, "float32") for v in model.trainable_variables]
    optimizer.apply_gradients(zip(zeros, model.trainable_variables))
    after = _by_path(model)
    np.testing.assert_allclose(after["patch_projection/kernel"],
                               before["patch_projection/kernel"] * (1 - lr * wd * 0.5),
                               rtol=1e-6)
    np.testing.assert_array_equal(after["head/kernel"], before["head/kernel"])


def test_learning_rate_multipliers_scale_adams_first_step():
    """Adam's first step of an element is lr * g / (|g| + eps), so +-lr * multiplier."""
    model = _small_vit_like_model()
    lr = 0.01
    multipliers = {"head/kernel": 0.25, "cls/class_token": 0.5}  # (patches never reach the head)
    model.compile(optimizer=adamw_no_decay_on_norms(lr, weight_decay=0.0,
                                                    learning_rate_multipliers=multipliers),
                  loss="mse")
    before = _by_path(model)
    x = np.random.default_rng(0).normal(size=(4, 4, 6)).astype("float32")
    model.fit(x, np.ones((4, 3), "float32"), epochs=1, batch_size=4, verbose=0)
    after = _by_path(model)
    for path, factor in {**multipliers, "layer_norm/gamma": 1.0}.items():
        step = np.abs(after[path] - before[path]).max()
        assert step == pytest.approx(lr * factor, rel=0.02), path


def test_learning_rate_multipliers_refuse_unknown_paths_and_negative_factors():
    with pytest.raises(ValueError, match="must be >= 0"):
        adamw_no_decay_on_norms(1e-3, learning_rate_multipliers={"head/kernel": -1.0})
    model = _small_vit_like_model()
    optimizer = adamw_no_decay_on_norms(1e-3, learning_rate_multipliers={"nope/kernel": 0.5})
    with pytest.raises(ValueError, match="nope/kernel"):
        optimizer.build(model.trainable_variables)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(
        adamw_no_decay_on_norms(1e-3, learning_rate_multipliers={"head/kernel": 0.5})))
    assert restored.learning_rate_multipliers == {"head/kernel": 0.5}
