"""The int8 routes timed against float32: a single product, the ViT's `predict`, and the
exported SavedModel's latency.

    python benchmarks/int8_routes.py product                  # this backend (KERAS_BACKEND)
    python benchmarks/int8_routes.py vit-predict [--images 512]
    python benchmarks/int8_routes.py export vit-cifar10 [--repeats 10]
    python benchmarks/int8_routes.py export translator-multi30k-en-de [--repeats 5]

Three variants each: `float32`; `int8-keras`, Keras' own int8 route everywhere (inputs
quantized, int8 x int8 products), as before `zoo.layers.int8_route`; `int8-routed`, the
zoo's choice (`int8_products_here`: float against the widened int8 weights on TensorFlow
without XLA, int8 products on JAX and under XLA). `product` adds the pieces of the int8
route (quantizing the inputs alone, the int8 `MatMul` alone, widening the kernel alone). The
export is loaded with `tf.saved_model.load` and called without XLA, as the model server
runs it; its `variables/` size is reported. Medians; writes
benchmarks/results/int8_routes-<what>-<backend>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

VARIANTS = ("float32", "int8-keras", "int8-routed")


@contextlib.contextmanager
def keras_int8_route() -> Iterator[None]:
    """Within the block, every int8 layer traced takes Keras' own int8 route."""
    from zoo.layers import int8_route, token_embedding

    saved = int8_route.int8_products_here
    int8_route.int8_products_here = token_embedding.int8_products_here = lambda: True
    try:
        yield
    finally:
        int8_route.int8_products_here = token_embedding.int8_products_here = saved


def route_for(variant: str) -> contextlib.AbstractContextManager:
    return keras_int8_route() if variant == "int8-keras" else contextlib.nullcontext()


def median_ms(call: Callable[[], Any], repeats: int) -> float:
    call()  # warm-up (traces)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 2)


def product(repeats: int) -> dict:
    """One 1024x1024 product of 32 and 256 rows, per route, traced without and with XLA."""
    import keras
    from keras import ops

    from zoo.layers.int8_route import route_int8_layer

    backend = keras.backend.backend()
    results = {}
    for rows in (32, 256):
        x = np.random.default_rng(0).normal(size=(rows, 1024)).astype("float32")
        layers = {}
        for variant in VARIANTS:
            keras.utils.set_random_seed(0)
            layers[variant] = keras.layers.Dense(1024, use_bias=False)
            layers[variant].build((None, 1024))
            if variant != "float32":
                layers[variant].quantize("int8")
            if variant == "int8-routed":
                route_int8_layer(layers[variant])
        kernel = layers["int8-keras"]._kernel
        pieces = {
            "piece: quantize the inputs": lambda v: keras.quantizers.abs_max_quantize(
                v, axis=-1)[0],
            "piece: int8 MatMul": lambda v: ops.matmul(ops.cast(v, "int8"), kernel),
            "piece: widen the kernel": lambda v: ops.cast(kernel, "float32")}
        for compiled in (("graph", "xla") if backend == "tensorflow" else ("jit",)):
            for name, fn in [*layers.items(), *pieces.items()]:
                traced = _trace(fn, compiled)
                results[f"{compiled}/{rows} rows/{name}"] = median_ms(
                    lambda: ops.convert_to_numpy(traced(x)), repeats)
    return results


def _trace(fn: Callable, compiled: str) -> Callable:
    if compiled == "jit":
        import jax

        return jax.jit(fn)
    import tensorflow as tf

    return tf.function(fn, jit_compile=compiled == "xla")


def vit_predict(images: int) -> dict:
    """`vit-cifar10`'s `predict` (batch 256) on random images, seconds per variant."""
    import zoo
    from zoo.models.quantization import quantize_model

    pixels = np.random.default_rng(0).integers(0, 256, (images, 32, 32, 3)).astype("uint8")
    results = {}
    for variant in VARIANTS:
        model = zoo.load("vit-cifar10")
        if variant != "float32":
            quantize_model(model)
        with route_for(variant):
            model.predict(pixels[:256], batch_size=256, verbose=0)  # traces
            started = time.perf_counter()
            model.predict(pixels, batch_size=256, verbose=0)
            elapsed = time.perf_counter() - started
        results[variant] = {"seconds": round(elapsed, 2),
                            "images_per_second": round(images / elapsed, 1)}
    return results


def export_latency(name: str, repeats: int) -> dict:
    """The export of `name` per variant: `variables/` bytes and serving latency, batch 1
    and 32 (real test inputs, as benchmarks/serving_latency.py feeds them)."""
    import tensorflow as tf

    import zoo
    from zoo.models.quantization import quantize_model
    from zoo.serving.export import export_model
    from serving_latency import folder_size, inputs_for  # benchmarks/, beside this script

    kind = "translator" if "translator" in name else "vit"
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in VARIANTS:
            model = zoo.load(name)
            if variant != "float32":
                quantize_model(model)
            with route_for(variant):
                version = export_model(model, tmp, name=variant)
            serve = tf.saved_model.load(str(version)).signatures["serving_default"]
            entry = {"variables_bytes": folder_size(version / "variables"),
                     "savedmodel_bytes": folder_size(version)}
            for batch in (1, 32):
                feed = inputs_for(name, kind, batch)
                entry[f"batch_{batch}_ms"] = median_ms(
                    lambda: [v.numpy() for v in serve(**feed).values()], repeats)
            results[variant] = entry
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["product", "vit-predict", "export"])
    parser.add_argument("model", nargs="?", default="vit-cifar10")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--images", type=int, default=512)
    args = parser.parse_args()

    import keras

    from zoo.bench.report import device, results_path, write_results

    load_before = os.getloadavg()[0]

    if args.what == "product":
        timings, label = product(args.repeats), "product"
    elif args.what == "vit-predict":
        timings, label = vit_predict(args.images), "vit-predict"
    else:
        timings, label = export_latency(args.model, args.repeats), f"export-{args.model}"
    result = {"what": label, "backend": keras.backend.backend(), "timings": timings,
              "machine": device(),
              "load_average": {"before": round(load_before, 2),
                               "after": round(os.getloadavg()[0], 2)},
              "command": f"python benchmarks/int8_routes.py {args.what}"
                         + (f" {args.model}" if args.what == "export" else "")}
    write_results(result, results_path(f"int8_routes-{label}-{keras.backend.backend()}"))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
