"""The int8 routes of one product timed against float32, and the pieces of the int8 route.

    python benchmarks/int8_routes.py [--repeats 20] [--output FOLDER]   # KERAS_BACKEND's

One 1024-wide `Dense` product of 32 and 256 rows, three ways: `float32`; `int8-keras`,
Keras' own int8 layer (inputs quantized per row, int8 x int8 products with int32 sums);
`int8-routed`, the same layer routed by `zoo.layers.int8_route` (on TensorFlow float against
the int8 kernel widened at call time, on JAX int8 products). Beside them the pieces of the
int8 route alone: quantizing the inputs, the int8 `MatMul`, widening the kernel. Each is
traced without and with XLA on TensorFlow (`tf.function`), with `jax.jit` on JAX, called
once untimed, then `--repeats` rounds of one call each, every function in turn
(`zoo.bench.steps.interleaved`); the medians in ms. Writes
benchmarks/results/int8_routes-BACKEND-HOST-DATE.json (`--output`: a folder or a file).

Whole models: `zoo bench --work int8` (Python, float32 beside int8) and
`benchmarks/serving_latency.py MODEL --variant float32 --variant int8-widened --variant
int8-products` (the exports as the model server runs them).
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Callable

import numpy as np

from zoo.bench.report import write_benchmark
from zoo.bench.steps import interleaved

VARIANTS = ("float32", "int8-keras", "int8-routed")


def product_layers() -> dict[str, Callable]:
    """The three `Dense(1024)` layers of the same weights (seed 0), by variant."""
    import keras

    from zoo.layers.int8_route import route_int8_layer

    layers = {}
    for variant in VARIANTS:
        keras.utils.set_random_seed(0)
        layers[variant] = keras.layers.Dense(1024, use_bias=False)
        layers[variant].build((None, 1024))
        if variant != "float32":
            layers[variant].quantize("int8")
        if variant == "int8-routed":
            route_int8_layer(layers[variant])
    return layers


def _trace(fn: Callable, compiled: str) -> Callable:
    if compiled == "jit":
        import jax

        return jax.jit(fn)
    import tensorflow as tf

    return tf.function(fn, jit_compile=compiled == "xla")


def product(repeats: int) -> dict[str, float]:
    """`{"<compiled>/<rows> rows/<variant or piece>": median ms}`."""
    import keras
    from keras import ops

    layers = product_layers()
    kernel = layers["int8-keras"]._kernel
    pieces = {
        "piece: quantize the inputs": lambda v: keras.quantizers.abs_max_quantize(
            v, axis=-1)[0],
        "piece: int8 MatMul": lambda v: ops.matmul(ops.cast(v, "int8"), kernel),
        "piece: widen the kernel": lambda v: ops.cast(kernel, "float32")}
    modes = ("graph", "xla") if keras.backend.backend() == "tensorflow" else ("jit",)
    results = {}
    for rows in (32, 256):
        x = np.random.default_rng(0).normal(size=(rows, 1024)).astype("float32")
        for compiled in modes:
            steps = {}
            for name, fn in [*layers.items(), *pieces.items()]:
                traced = _trace(fn, compiled)
                steps[name] = lambda traced=traced: ops.convert_to_numpy(traced(x))
                steps[name]()  # traces
            for name, seconds in interleaved(steps, repeats).items():
                results[f"{compiled}/{rows} rows/{name}"] = round(
                    1000 * statistics.median(seconds), 3)
    return results


def main(argv: list[str] | None = None) -> None:
    """Times the product on this backend and writes the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20, help="rounds (medians)")
    parser.add_argument("--output", help="a folder, or a file (default benchmarks/results/)")
    args = parser.parse_args(argv)
    import keras

    load_before = os.getloadavg()[0]
    timings = product(args.repeats)
    for name, milliseconds in timings.items():
        print(f"{name:50s} {milliseconds:9.3f} ms")
    write_benchmark(__file__, {
        "settings": {"width": 1024, "rows": [32, 256], "repeats": args.repeats},
        "backend": keras.backend.backend(), "timings_ms": timings,
        "load_average": {"before": round(load_before, 2),
                         "after": round(os.getloadavg()[0], 2)},
    }, variant=keras.backend.backend(), output=args.output)


if __name__ == "__main__":
    main()
