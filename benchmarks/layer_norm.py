"""Keras's LayerNormalization against the zoo's, forward and forward + backward, on TensorFlow.

    python benchmarks/layer_norm.py [--shape 128 65 192] [--rounds 10] [--calls 20]
        [--output benchmarks/results/layer_norm.json]

Both layers normalize the same `(batch, tokens, width)` tensor (by default one ViT-tiny train
batch: 128 images, 65 tokens, width 192) inside a `tf.function`, with oneDNN on as the `zoo`
command runs TensorFlow. Their calls alternate, the order swapped every round, and the mean
milliseconds a call of each are printed and written as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["KERAS_BACKEND"] = "tensorflow"
from zoo.runtime import use_onednn  # noqa: E402

use_onednn()  # before TensorFlow loads
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from zoo.layers.layer_normalization import LayerNormalization  # noqa: E402


def steps(layer: keras.layers.Layer, x: tf.Tensor, upstream: tf.Tensor) -> dict:
    """`{"forward": fn, "forward+backward": fn}` for `layer`, each a traced function of x."""

    @tf.function
    def forward(x: tf.Tensor) -> tf.Tensor:
        return layer(x)

    @tf.function
    def forward_backward(x: tf.Tensor) -> list:
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x) * upstream)
        return tape.gradient(loss, [x] + layer.trainable_variables)

    return {"forward": forward, "forward+backward": forward_backward}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, default=[128, 65, 192])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=20, help="calls timed per round")
    parser.add_argument("--output", type=Path,
                        default=Path(__file__).parent / "results" / "layer_norm.json")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=args.shape).astype("float32") * 3.0 + 1.0)
    upstream = tf.constant(rng.normal(size=args.shape).astype("float32"))
    layers = {"keras": keras.layers.LayerNormalization(epsilon=1e-6),
              "zoo": LayerNormalization(epsilon=1e-6)}
    functions = {name: steps(layer, x, upstream) for name, layer in layers.items()}
    results = []
    for work in ("forward", "forward+backward"):
        times: dict[str, list[float]] = {name: [] for name in layers}
        for name in layers:  # trace and warm up
            for _ in range(3):
                tf.nest.map_structure(np.asarray, functions[name][work](x))
        for number in range(args.rounds):
            for name in (list(layers) if number % 2 == 0 else list(layers)[::-1]):
                started = time.perf_counter()
                for _ in range(args.calls):
                    out = functions[name][work](x)
                tf.nest.map_structure(np.asarray, out)
                times[name].append((time.perf_counter() - started) / args.calls * 1e3)
        for name, values in times.items():
            mean = sum(values) / len(values)
            results.append({"work": work, "layer": name, "ms": round(mean, 3)})
            print(f"{work:17s} {name:6s} {mean:7.2f} ms a call")
    args.output.write_text(json.dumps({
        "shape": args.shape, "rounds": args.rounds, "calls": args.calls,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "versions": {"keras": keras.__version__, "tensorflow": tf.__version__},
        "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
