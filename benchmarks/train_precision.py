"""The ViT train step's speed in float32 and in mixed_bfloat16 on this machine's CPU.

    python benchmarks/train_precision.py [--architecture vit-cifar-small] [--steps 8]
        [--repeats 2]

Each (precision, repeat) runs in its own process (the dtype policy is global), as `zoo train`
would run it (TensorFlow's oneDNN kernels on, `zoo.runtime.use_onednn`): the
architecture with random weights, AdamW, `train_on_batch` on one batch of 128 random 32 x 32
images, 2 untimed steps then `--steps` timed (the harness's `zoo.bench.steps.measure`).
Prints images/s and whether the CPU computes bfloat16 natively
(`zoo.training.precision.cpu_has_native_bfloat16`); writes
benchmarks/results/train_precision-HOST-DATE.json (`zoo.bench.report.result_name`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo.bench.report import write_benchmark  # noqa: E402
from zoo.bench.steps import measure  # noqa: E402

BATCH = 128


def images_per_second(precision: str, architecture: str, steps: int) -> float:
    """One process's measurement (run as `--worker PRECISION`), TensorFlow's oneDNN kernels
    on as the `zoo` command has them."""
    from zoo.runtime import use_onednn

    use_onednn()
    import keras
    import numpy as np

    keras.mixed_precision.set_global_policy(precision)
    from zoo.models.vit.model import VisionTransformer

    model = VisionTransformer.from_architecture(architecture, num_classes=10, dropout=0.0)
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (BATCH, 32, 32, 3)).astype("float32")
    labels = rng.integers(0, 10, BATCH)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return measure(lambda: model.train_on_batch(images, labels), BATCH, 0.0, warmup=2,
                   min_calls=steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--architecture", default="vit-cifar-small")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(images_per_second(args.worker, args.architecture, args.steps)))
        return
    from zoo.training.precision import cpu_has_native_bfloat16

    rates: dict[str, list[float]] = {"float32": [], "mixed_bfloat16": []}
    for _ in range(args.repeats):
        for precision in rates:
            done = subprocess.run(
                [sys.executable, __file__, "--worker", precision, "--architecture",
                 args.architecture, "--steps", str(args.steps)],
                capture_output=True, text=True, check=True)
            rates[precision].append(round(float(done.stdout.strip().splitlines()[-1]), 1))
            print(f"{precision:15s} {rates[precision][-1]:7.1f} images/s", flush=True)
    result = {"benchmark": "train_precision", "native_bfloat16": cpu_has_native_bfloat16(),
              "settings": {"architecture": args.architecture, "batch": BATCH,
                           "steps": args.steps,
                           "backend": os.environ.get("KERAS_BACKEND", "tensorflow")},
              "images_per_second": rates}
    print(f"native bfloat16: {result['native_bfloat16']}")
    write_benchmark(__file__, result)


if __name__ == "__main__":
    main()
