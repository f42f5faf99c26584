"""Global precision policy and loss scaling for float16."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from zoo.training.precision import (PRECISIONS, bfloat16_warning, cpu_has_native_bfloat16,
                                set_precision, wrap_optimizer_for_precision)


@pytest.fixture(autouse=True)
def _restore_policy():
    previous = keras.mixed_precision.global_policy()
    yield
    keras.mixed_precision.set_global_policy(previous)


@pytest.mark.parametrize("name", PRECISIONS)
def test_set_precision_sets_the_policy_of_new_layers(name):
    policy = set_precision(name)
    assert policy.name == name
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    assert layer.dtype_policy.name == name
    assert layer.kernel.dtype == "float32"  # variables stay float32
    assert layer.compute_dtype == name.replace("mixed_", "")


def test_unknown_precision_lists_the_valid_names():
    with pytest.raises(ValueError) as error:
        set_precision("float16")
    for name in ("'float16'", *PRECISIONS):
        assert name in str(error.value)


def test_wrap_only_for_mixed_float16():
    adam = keras.optimizers.Adam()
    assert wrap_optimizer_for_precision(adam, "float32") is adam
    assert wrap_optimizer_for_precision(adam, "mixed_bfloat16") is adam
    wrapped = wrap_optimizer_for_precision(adam, "mixed_float16")
    assert isinstance(wrapped, keras.optimizers.LossScaleOptimizer)
    assert wrapped.inner_optimizer is adam
    # No double wrapping.
    assert wrap_optimizer_for_precision(wrapped, "mixed_float16") is wrapped
    set_precision("mixed_float16")
    global_wrapped = wrap_optimizer_for_precision(keras.optimizers.SGD())
    assert isinstance(global_wrapped, keras.optimizers.LossScaleOptimizer)
    with pytest.raises(ValueError):
        wrap_optimizer_for_precision(adam, "float17")


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    return model


def test_compile_wraps_mixed_float16_models_itself_and_never_twice():
    # The Keras behaviour precision.py documents: compile adds loss scaling by itself.
    set_precision("mixed_float16")
    model = _model()
    model.compile(optimizer=keras.optimizers.Adam(), loss="mse")
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)

    wrapped = wrap_optimizer_for_precision(keras.optimizers.Adam(), "mixed_float16")
    model = _model()
    model.compile(optimizer=wrapped, loss="mse")
    assert model.optimizer is wrapped
    assert not isinstance(model.optimizer.inner_optimizer, keras.optimizers.LossScaleOptimizer)
    history = model.fit(np.ones((4, 3)), np.ones((4, 2)), epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert wrapped.built  # fit trained with our wrapper (it may skip overflowing steps)


def test_compile_does_not_wrap_float32_or_bfloat16_models():
    for name in ("float32", "mixed_bfloat16"):
        set_precision(name)
        model = _model()
        model.compile(optimizer=keras.optimizers.Adam(), loss="mse")
        assert not isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)


# Two cores of /proc/cpuinfo as Linux writes them (flags shortened): an AVX2 host (a
# hypervisor that hides AVX-512) and a Zen 4 host with AVX512_BF16.
AVX2 = ("processor\t: {n}\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n"
        "flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 sha_ni vaes\n\n")
BF16 = AVX2.replace("avx2 ", "avx2 avx512f avx512bw avx512_vnni avx512_bf16 ")


@pytest.mark.parametrize("text, native", [(AVX2, False), (BF16, True),
                                          (AVX2.replace("avx2", "avx2 amx_bf16"), True)])
def test_native_bfloat16_is_read_off_the_cpu_flags(tmp_path, text, native):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text.format(n=0) + text.format(n=1))
    assert cpu_has_native_bfloat16(cpuinfo) is native


def test_no_cpuinfo_tells_nothing_and_warns_nothing(tmp_path):
    missing = tmp_path / "absent"
    assert cpu_has_native_bfloat16(missing) is None
    assert bfloat16_warning("mixed_bfloat16", ["cpu:0"], missing, "tensorflow") is None


def test_bfloat16_on_a_cpu_without_it_is_one_warning_line(tmp_path):
    avx2, bf16 = tmp_path / "avx2", tmp_path / "bf16"
    avx2.write_text(AVX2.format(n=0))
    bf16.write_text(BF16.format(n=0))
    message = bfloat16_warning("mixed_bfloat16", ["cpu:0"], avx2)
    assert "\n" not in message and "avx512_bf16" in message and "--precision float32" in message
    # Not for other precisions, a CPU that has it, or a run on a GPU.
    assert bfloat16_warning("float32", ["cpu:0"], avx2) is None
    assert bfloat16_warning("mixed_float16", ["cpu:0"], avx2) is None
    assert bfloat16_warning("mixed_bfloat16", ["cpu:0"], bf16, "tensorflow") is None
    assert bfloat16_warning("mixed_bfloat16", ["cpu:0", "gpu:0"], avx2) is None


def test_bfloat16_on_jax_on_a_cpu_warns_where_xla_widens_its_products(tmp_path, monkeypatch):
    import zoo.training.precision as precision

    bf16 = tmp_path / "bf16"
    bf16.write_text(BF16.format(n=0))
    monkeypatch.setattr(precision, "xla_widens_bfloat16", lambda: True)
    message = bfloat16_warning("mixed_bfloat16", ["cpu:0"], bf16, "jax")
    assert "\n" not in message and "XLA" in message and "--precision float32" in message
    assert "KERAS_BACKEND=tensorflow" in message and "trains slower" in message
    assert bfloat16_warning("float32", ["cpu:0"], bf16, "jax") is None
    assert bfloat16_warning("mixed_bfloat16", ["cpu:0", "gpu:0"], bf16, "jax") is None
    monkeypatch.setattr(precision, "xla_widens_bfloat16", lambda: False)
    assert bfloat16_warning("mixed_bfloat16", ["cpu:0"], bf16, "jax") is None


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="XLA's choice, read on JAX")
def test_xla_widening_probe_tells_what_xla_does_to_a_keras_layers_product():
    # The probe compiles a bare bfloat16 product; a mixed_bfloat16 Dense layer's product,
    # compiled as a model's, must be kept or widened alike.
    import jax

    from zoo.training.cpu_features import hlo_dots
    from zoo.training.precision import xla_widens_bfloat16

    layer = keras.layers.Dense(32, dtype="mixed_bfloat16")
    inputs = np.ones((8, 48), "float32")
    layer.build(inputs.shape)

    def call(kernel, bias, x):
        return layer.stateless_call([kernel, bias], [], x)[0]

    hlo = jax.jit(call).lower(layer.kernel.value, layer.bias.value, inputs).compile().as_text()
    dots = hlo_dots(hlo)
    assert sum(dots.values()) == 1
    assert xla_widens_bfloat16() is (list(dots)[0][1] != "bf16")


def test_a_run_started_in_bfloat16_on_such_a_cpu_warns(tmp_path, monkeypatch):
    import zoo.training.run

    avx2 = tmp_path / "avx2"
    avx2.write_text(AVX2.format(n=0))
    monkeypatch.setattr(zoo.training.run, "bfloat16_warning",
                        lambda precision: bfloat16_warning(precision, ["cpu:0"], avx2))
    with pytest.warns(UserWarning, match="trains slower than float32"):
        zoo.training.run.start_run(tmp_path / "run", [], False, 0, "mixed_bfloat16")
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
