"""How close the ViT-tiny step could come to the host's peak: its own matrix products, alone.

    python benchmarks/product_bound.py [--work vit-tiny-train|vit-tiny-infer]
        [--precision float32|bfloat16] [--rounds 6]

A step reaches a fraction of the host's peak (`zoo bench`'s 4096^3 product) no higher than
its matrix products do when they run with nothing between them. This script traces the
bench's ViT-tiny step on TensorFlow (oneDNN on, random weights; the train step's forward and
`tape.gradient`, or the forward alone), collects every matrix product of its graph
(`MatMul`, `BatchMatMulV2/V3`, `Einsum`, `Conv2D`, `Conv2DBackpropFilter`) with its operand
shapes, dtypes and transposes, and rebuilds them as one `tf.function` of the same products
on random operands. It times that function against the step itself (Keras'
`train_on_batch` / `predict_on_batch`, `zoo.bench.workers.keras_vit_step`) in alternating
rounds (`zoo.bench.steps.interleaved`), then each distinct product alone, and measures the
host's peak in the step's precision (`zoo.bench.peak.measure_peak`; a bfloat16 step's is the
faster of bfloat16's and float32's, `zoo.bench.peak.limit`, as in `zoo bench`). It prints,
and writes to benchmarks/results/product_bound-WORK-PRECISION-HOST-DATE.json:

- the step's time, its products' time alone, and the products' share of the step;
- the FLOP/s each reaches, as a fraction of the peak: the products' fraction bounds the
  step's;
- per distinct product: its shapes, count in the step, time and fraction of the peak;
- the bytes the step's other ops read and write (`zoo.bench.step_products.graph_traffic`),
  by op type, and the least time they take at the rate one large addition moves data on
  the host: a floor on the step's time outside its products that only fusing ops can lower.

Comparing a float32 run's products with a bfloat16 run's bounds what bfloat16 can gain on
the step when everything but the products took no time.
"""

from __future__ import annotations

import collections
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["KERAS_BACKEND"] = "tensorflow"
from zoo.runtime import use_onednn  # noqa: E402

use_onednn()  # before TensorFlow loads
from zoo.bench.peak import limit, measure_peak  # noqa: E402
from zoo.bench.report import write_benchmark  # noqa: E402
from zoo.bench.step_products import (graph_products, graph_traffic, product_flops,  # noqa: E402
                                     rebuilt)
from zoo.bench.steps import interleaved, keras_vit_model, seconds_per_call  # noqa: E402
from zoo.bench.workers import keras_vit_step, set_keras_policy, vit_step_parser  # noqa: E402
from zoo.bench.works import SETTINGS, VIT_TINY, flops_per_unit  # noqa: E402


def traced_step(work: str) -> tuple[Any, Any]:
    """`(function, images)`: `work`'s step as one `tf.function` to trace on `images`."""
    import keras
    import tensorflow as tf

    batch = SETTINGS["vit_train_batch" if work == "vit-tiny-train" else "vit_infer_batch"]
    set_keras_policy()
    model, images = keras_vit_model("zoo", VIT_TINY, batch)
    labels = tf.zeros((batch,), tf.int32)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(autograph=False)
    def traced(x: Any) -> Any:
        if work != "vit-tiny-train":
            return model(x, training=False)
        with tf.GradientTape() as tape:
            value = loss(labels, model(x, training=True))
        return tape.gradient(value, model.trainable_variables)

    return traced, tf.constant(images)


def copy_rate() -> float:
    """Bytes a second that one large float32 addition (64 MiB operands) reads and writes on
    this host: the rate the step's ops outside its products can move data at, at best."""
    import tensorflow as tf

    a, b = (tf.random.normal((16 * 2**20,)) for _ in range(2))
    add = tf.function(lambda: (a + b)[0])
    return 3 * 64 * 2**20 / seconds_per_call(add, calls=20, warmup=3)


def main() -> None:
    parser = vit_step_parser(__doc__.splitlines()[0])
    args = parser.parse_args()
    os.environ["ZOO_BENCH_PRECISION"] = args.precision  # read by set_keras_policy
    traced, images = traced_step(args.work)
    signatures = graph_products(traced, images)
    traffic = graph_traffic(traced, images)
    products, operands = rebuilt(signatures)
    step, batch = keras_vit_step(args.work, "zoo")
    for _ in range(3):
        step()
        products(*operands)
    times = interleaved({"step": step, "products": lambda: products(*operands)},
                        args.rounds, calls=3)
    step_seconds, product_seconds = (statistics.median(times[name])
                                     for name in ("step", "products"))
    measured = {("tensorflow", r["variant"]): r["rate"] for r in measure_peak("tensorflow", 3.0)}
    peak, _ = limit(measured, "tensorflow", args.precision)
    flops = sum(product_flops(s) for s in signatures)

    def fraction(seconds: float) -> float:
        return flops / seconds / 1e9 / peak

    distinct = collections.Counter(signatures)
    alone = []
    for signature, count in distinct.most_common():
        function, tensors = rebuilt([signature])
        seconds = seconds_per_call(lambda: function(*tensors), calls=20, warmup=3)
        alone.append({"type": signature[0], "shapes": signature[1], "dtype": signature[2],
                      "attributes": dict(signature[3]), "count": count,
                      "milliseconds": round(seconds * 1e3, 3),
                      "fraction_of_peak": round(product_flops(signature) / seconds / 1e9
                                                / peak, 3)})
    counted = flops_per_unit(args.work) * batch  # the bench's count, from the shapes
    moved, rate = sum(traffic.values()), copy_rate()
    print(f"{args.work}, {args.precision}, batch {batch}: {len(signatures)} products, "
          f"{flops / 1e9:.2f} GFLOP a step (the bench counts {counted / 1e9:.2f}); peak "
          f"{peak:.0f} GFLOP/s")
    print(f"step      {step_seconds * 1e3:8.1f} ms  {fraction(step_seconds):6.1%} of the peak")
    print(f"products  {product_seconds * 1e3:8.1f} ms  {fraction(product_seconds):6.1%} of the "
          f"peak ({product_seconds / step_seconds:.0%} of the step)")
    print(f"the rest {(step_seconds - product_seconds) * 1e3:8.1f} ms; its ops read and write "
          f"{moved / 1e9:.2f} GB, at least {moved / rate * 1e3:.1f} ms at {rate / 1e9:.1f} GB/s "
          f"(a large addition's rate)")
    for row in alone:
        print(f"  {row['count']:3d} x {row['type']:20s} {row['dtype']:8s} "
              f"{str(row['shapes']):44s} {row['milliseconds']:7.3f} ms "
              f"{row['fraction_of_peak']:6.1%}")
    write_benchmark(__file__, {
        "work": args.work, "precision": args.precision, "batch": batch,
        "rounds": args.rounds, "gflop_per_step": round(flops / 1e9, 3),
        "bench_gflop_per_step": round(counted / 1e9, 3),
        "peak_gflops": round(peak, 1),
        "step_ms": [round(s * 1e3, 2) for s in times["step"]],
        "products_ms": [round(s * 1e3, 2) for s in times["products"]],
        "step_fraction_of_peak": round(fraction(step_seconds), 3),
        "products_fraction_of_peak": round(fraction(product_seconds), 3),
        "products_share_of_step": round(product_seconds / step_seconds, 3),
        "distinct_products": alone,
        "other_ops_bytes": {kind: size for kind, size in sorted(
            traffic.items(), key=lambda item: -item[1])},
        "other_ops_gb": round(moved / 1e9, 3), "copy_rate_gb_per_s": round(rate / 1e9, 2),
        "other_ops_floor_ms": round(moved / rate * 1e3, 1)},
        variant=f"{args.work}-{args.precision}", output=args.output)


if __name__ == "__main__":
    main()
