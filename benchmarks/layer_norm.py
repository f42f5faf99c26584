"""Keras's LayerNormalization against the zoo's, forward and forward + backward, on TensorFlow.

    python benchmarks/layer_norm.py [--shape 128 65 192] [--rounds 10] [--calls 20]
        [--output FILE.json]

Both layers normalize the same `(batch, tokens, width)` tensor (by default one ViT-tiny train
batch: 128 images, 65 tokens, width 192) inside a `tf.function`, with oneDNN on as the `zoo`
command runs TensorFlow. Their calls alternate, the order swapped every round (the
harness's `zoo.bench.steps.interleaved`; each call's result is read back to NumPy), and the
mean milliseconds a call of each are printed and written to
benchmarks/results/layer_norm-HOST-DATE.json.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["KERAS_BACKEND"] = "tensorflow"
from zoo.bench.report import write_benchmark  # noqa: E402
from zoo.bench.steps import interleaved  # noqa: E402
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
                        help="default: benchmarks/results/layer_norm-HOST-DATE.json")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=args.shape).astype("float32") * 3.0 + 1.0)
    upstream = tf.constant(rng.normal(size=args.shape).astype("float32"))
    layers = {"keras": keras.layers.LayerNormalization(epsilon=1e-6),
              "zoo": LayerNormalization(epsilon=1e-6)}
    functions = {name: steps(layer, x, upstream) for name, layer in layers.items()}
    results = []
    for work in ("forward", "forward+backward"):
        calls = {name: (lambda f=functions[name][work]: tf.nest.map_structure(np.asarray, f(x)))
                 for name in layers}
        for call in calls.values():  # trace and warm up
            for _ in range(3):
                call()
        times = interleaved(calls, args.rounds, args.calls)
        for name, values in times.items():
            mean = sum(values) / len(values) * 1e3
            results.append({"work": work, "layer": name, "ms": round(mean, 3)})
            print(f"{work:17s} {name:6s} {mean:7.2f} ms a call")
    write_benchmark(__file__, {"shape": args.shape, "rounds": args.rounds,
                               "calls": args.calls, "results": results}, output=args.output)


if __name__ == "__main__":
    main()
