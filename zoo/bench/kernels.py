"""Which kernels a bfloat16 run actually takes: the dtype is not enough (XLA's CPU backend
converts a bfloat16 product to float32 and back; oneDNN picks an AMX, AVX-512 BF16 or plain
AVX-512 implementation by what the CPU has).

    KERAS_BACKEND=tensorflow python -m zoo.bench.kernels [--precision mixed_bfloat16]
    KERAS_BACKEND=jax python -m zoo.bench.kernels

runs the bench's ViT-tiny train step (batch 16) and prints, on TensorFlow, every oneDNN
matrix product it executed (`ONEDNN_VERBOSE=1` in a child process: implementation and
operand dtypes, with counts), on JAX the dtypes of every `dot` of the step's HLO as JAX
hands it to XLA and as XLA compiled it (`jax.jit(...).lower(...).compile().as_text()`).

Found on a Xeon with AMX (2026-11-28; TensorFlow 2.21, JAX 0.10.2): TensorFlow runs the
mixed_bfloat16 step's dense products and patch convolution on AMX (`brg_matmul:
avx10_1_512_amx`), the rest as bfloat16 `x64:gemm:jit` inner products, and the attention
logits in float32 (by design); XLA's CPU backend converts every bfloat16 `dot` to float32
and back, so on JAX bfloat16 computes nothing faster on a CPU (no XLA flag tried changed
that: `xla_cpu_use_onednn`, the oneDNN, XNNPACK and YNNPACK fusion types). `onednn_products`
and `hlo_dots` (`zoo.training.cpu_features`, where `zoo.training.precision` reads XLA's choice
too) read those texts (tests/zoo/bench/test_kernels.py).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys

from zoo.training.cpu_features import hlo_dots

MARK = "ZOO_KERNELS_TIMED_STEP"
_ONEDNN = re.compile(r"onednn_verbose,[^\n]*?exec,cpu,(matmul|inner_product|convolution),"
                     r"([^,]+),[^,]*,src:(\w+)\S*\s+wei:(\w+)")


def onednn_products(log: str) -> collections.Counter:
    """`{(primitive, implementation, source dtype, weight dtype): count}` of the matrix
    products (matmul, inner product, convolution) in a `ONEDNN_VERBOSE=1` log, after its
    `MARK` line where it has one (the warm-up's, which may differ, left out)."""
    log = log.split(MARK, 1)[-1]
    return collections.Counter(m.groups() for m in _ONEDNN.finditer(log))


def _model_and_batch(precision: str) -> tuple:
    import keras
    import numpy as np

    from zoo.bench.works import VIT_TINY
    from zoo.models.vit.model import VisionTransformer

    keras.mixed_precision.set_global_policy(precision)
    keras.utils.set_random_seed(0)
    model = VisionTransformer(dropout=0.0, **VIT_TINY)
    images = np.random.default_rng(0).uniform(0, 255, (16, 32, 32, 3)).astype("float32")
    return model, images, np.arange(16) % VIT_TINY["num_classes"]


def _tensorflow_step(precision: str) -> None:
    """Two warm-up train steps, `MARK`, one more (run under ONEDNN_VERBOSE by `main`)."""
    import keras

    from zoo.runtime import use_onednn

    use_onednn()
    model, images, labels = _model_and_batch(precision)
    model.compile(optimizer=keras.optimizers.AdamW(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    for _ in range(2):
        model.train_on_batch(images, labels)
    print(MARK, flush=True)
    model.train_on_batch(images, labels)


def jax_step_hlo(precision: str, compiled: bool = True) -> str:
    """The HLO of the ViT's loss and gradients on JAX under `precision`: as XLA compiled it
    for this device, or (`compiled=False`) as JAX handed it to XLA."""
    import jax
    import keras

    model, images, labels = _model_and_batch(precision)
    model(images[:1])
    loss_function = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def loss(trainable, frozen, x, y):
        logits, _ = model.stateless_call(trainable, frozen, x)
        return loss_function(y, logits)

    trainable = [v.value for v in model.trainable_variables]
    frozen = [v.value for v in model.non_trainable_variables]
    step = jax.jit(jax.value_and_grad(loss))
    lowered = step.lower(trainable, frozen, images, labels)
    return lowered.compile().as_text() if compiled else lowered.as_text(dialect="hlo")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", default="mixed_bfloat16")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    if args.child:
        _tensorflow_step(args.precision)
        return
    if backend == "jax":
        counts = collections.Counter()
        for compiled in (False, True):
            stage = "compiled" if compiled else "handed to XLA"
            for key, count in hlo_dots(jax_step_hlo(args.precision, compiled)).items():
                counts[(stage, *key)] = count
        header = "| dots | HLO | result dtype | operand dtype |"
    else:
        done = subprocess.run(
            [sys.executable, "-m", "zoo.bench.kernels", "--child", "--precision",
             args.precision], capture_output=True, text=True,
            env=dict(os.environ, ONEDNN_VERBOSE="1", TF_CPP_MIN_LOG_LEVEL="3"), check=True)
        counts = onednn_products(done.stdout + done.stderr)
        header = "| products | primitive | implementation | source | weights |"
    print(f"{backend}, {args.precision}: the ViT-tiny train step's products")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for key, count in counts.most_common():
        print(f"| {count} | " + " | ".join(key) + " |")


if __name__ == "__main__":
    main()
