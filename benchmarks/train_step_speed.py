"""Images per second of a ViT train step on this machine's CPU: the zoo's architectures, and
hybrid shapes with convolutional stems, in float32 and in mixed_bfloat16.

    python benchmarks/train_step_speed.py [--architecture vit-cifar-small ...]
        [--hybrid [NAME-SUBSTRING ...]] [--precision float32 mixed_bfloat16]
        [--steps 8] [--repeats 2]

One script for what train_precision.py (an architecture in two precisions) and
hybrid_stem_speed.py (hybrid shapes) each measured with a loop of its own. Each (model,
precision, repeat) runs in its own process (the dtype policy is global), as `zoo train`
would run it (TensorFlow's oneDNN kernels on, `zoo.runtime.use_onednn`): random weights,
AdamW, `train_on_batch` on one batch of 128 random 32 x 32 images, 2 untimed steps then
`--steps` timed (the harness's `zoo.bench.steps.measure`).

Models: each `--architecture` (a name of `zoo.models.architectures`), and with `--hybrid` the
hybrid shapes of `HYBRIDS` whose names contain one of its substrings (all of them when it has
none): convolutional stems with batch norm under the zoo's encoder blocks, sketched as
functional Keras models (docs/training-runs.md, "A batch-normalised stem"). With neither,
`vit-cifar-small`. Prints images/s and whether the CPU computes bfloat16 natively
(`zoo.training.precision.cpu_has_native_bfloat16`); writes
benchmarks/results/train_step_speed-HOST-DATE.json (`zoo.bench.report.result_name`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo.bench.report import write_benchmark  # noqa: E402
from zoo.bench.steps import measure  # noqa: E402

BATCH = 128
PRECISIONS = ("float32", "mixed_bfloat16")
# name: (stem stages, encoder width, blocks, heads, MLP width). A stem stage is a list of
# convolution channels (3 x 3, batch norm, ReLU), ended by a 2 x 2 max pooling.
HYBRIDS = {
    "A 64|128 d192x4": ([[64], [128]], 192, 4, 3, 384),
    "B 64|128,128 d192x4": ([[64], [128, 128]], 192, 4, 3, 384),
    "D 64|128|256 d256x2": ([[64], [128], [256]], 256, 2, 4, 512),
    "E 64|128,128|256 d256x2": ([[64], [128, 128], [256]], 256, 2, 4, 512),
    "vit-cifar-vgg 64|128,128|256 d256x4": ([[64], [128, 128], [256]], 256, 4, 4, 512),
}


def hybrid(stages: list[list[int]], width: int, blocks: int, heads: int, mlp: int) -> Any:
    """A hybrid of the given shape: stem, 1 x 1 patch projection, class token, pre-norm
    blocks, final norm and a 10-class head (float32 logits) on the class token."""
    import keras

    from zoo.layers.class_token import ClassToken
    from zoo.layers.transformer_encoder import TransformerEncoderBlock

    inputs = keras.Input((32, 32, 3))
    x = inputs
    for stage in stages:
        for channels in stage:
            x = keras.layers.Conv2D(channels, 3, padding="same", use_bias=False)(x)
            x = keras.layers.ReLU()(keras.layers.BatchNormalization()(x))
        x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Reshape((x.shape[1] * x.shape[2], x.shape[3]))(x)
    x = ClassToken()(keras.layers.Dense(width)(x))
    for _ in range(blocks):
        x = TransformerEncoderBlock(heads, mlp, normalize_first=True, activation="gelu")(x)
    outputs = keras.layers.Dense(10, dtype="float32")(keras.layers.LayerNormalization()(x[:, 0]))
    return keras.Model(inputs, outputs)


def images_per_second(model_name: str, precision: str, steps: int) -> dict:
    """One process's measurement (run as `--worker MODEL PRECISION`): `model_name` is
    `architecture:NAME` or `hybrid:NAME`."""
    from zoo.runtime import use_onednn

    use_onednn()  # before TensorFlow loads
    import keras
    import numpy as np

    keras.mixed_precision.set_global_policy(precision)
    kind, name = model_name.split(":", 1)
    if kind == "hybrid":
        model = hybrid(*HYBRIDS[name])
    else:
        from zoo.models.vit.model import VisionTransformer

        model = VisionTransformer.from_architecture(name, num_classes=10, dropout=0.0)
    rng = np.random.default_rng(0)
    # The zoo's ViT rescales pixels itself; the hybrid sketches take them in [0, 1).
    images = rng.uniform(0, 255 if kind != "hybrid" else 1, (BATCH, 32, 32, 3)).astype(
        "float32")
    labels = rng.integers(0, 10, BATCH)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rate = measure(lambda: model.train_on_batch(images, labels), BATCH, 0.0,
                   warmup=2, min_calls=steps)
    return {"rate": rate, "parameters": int(model.count_params())}


def models(args: argparse.Namespace) -> list[str]:
    """The `kind:NAME` of every model the flags ask for."""
    chosen = [f"architecture:{name}" for name in args.architecture or []]
    if args.hybrid is not None:
        chosen += [f"hybrid:{name}" for name in HYBRIDS
                   if not args.hybrid or any(part in name for part in args.hybrid)]
    return chosen or ["architecture:vit-cifar-small"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--architecture", action="append", metavar="NAME",
                        help="a zoo architecture, repeatable (default: vit-cifar-small)")
    parser.add_argument("--hybrid", nargs="*", metavar="NAME-SUBSTRING",
                        help="hybrid shapes whose names contain one of these (none: all)")
    parser.add_argument("--precision", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(images_per_second(*args.worker, args.steps)))
        return
    from zoo.training.precision import cpu_has_native_bfloat16

    results = {(m, p): {"model": m, "precision": p, "images_per_second": []}
               for m in models(args) for p in args.precision}
    for _ in range(args.repeats):
        for (model, precision), row in results.items():
            done = subprocess.run(
                [sys.executable, __file__, "--worker", model, precision, "--steps",
                 str(args.steps)], capture_output=True, text=True, check=True)
            measured = json.loads(done.stdout.strip().splitlines()[-1])
            row["parameters"] = measured["parameters"]
            row["images_per_second"].append(round(measured["rate"], 1))
            print(f"{model:45s} {precision:15s} {measured['rate']:7.1f} images/s", flush=True)
    native = cpu_has_native_bfloat16()
    print(f"native bfloat16: {native}")
    write_benchmark(__file__, {
        "native_bfloat16": native,
        "settings": {"batch": BATCH, "steps": args.steps, "repeats": args.repeats,
                     "precisions": args.precision,
                     "backend": os.environ.get("KERAS_BACKEND", "tensorflow")},
        "results": list(results.values())})


if __name__ == "__main__":
    main()
