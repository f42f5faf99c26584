"""Where the ViT-tiny step's time goes on TensorFlow: op types, and the matrix products' share.

    python benchmarks/step_profile.py [--work vit-tiny-train|vit-tiny-infer] [--steps 5]
        [--precision float32|bfloat16] [--top 25] [--output FILE.json]

Builds `zoo bench`'s ViT-tiny step (`zoo.bench.workers.keras_vit_step`: random weights, its
batch for the work; oneDNN on, as the `zoo` command runs TensorFlow; `--precision bfloat16`:
Keras' `mixed_bfloat16`, as `zoo bench --precision bfloat16`), warms it up, and records `--steps` steps with
`tf.profiler`. Prints, a step:
- the milliseconds each op type ran on TensorFlow's compute threads (ops that run side by side
  each count their own time, so these add up to more than the step);
- the step's span, the time some op was running (their union), and the time some matrix
  product or convolution was running. The last over the span is how far the step is bound by
  its matrix products, which no change outside them can speed up.
The profiler's own clock times the ops; the figures go to
benchmarks/results/step_profile-WORK[-bfloat16]-HOST-DATE.json (`zoo.bench.report.result_name`).
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["KERAS_BACKEND"] = "tensorflow"
from zoo.runtime import use_onednn  # noqa: E402

use_onednn()  # before TensorFlow loads
import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

from zoo.bench.report import write_benchmark  # noqa: E402
from zoo.bench.workers import keras_vit_step  # noqa: E402

PRODUCTS = ("MatMul", "Conv2D")  # in the op type's name, oneDNN's fused forms included
# The event of an XLA-compiled call (zoo.layers.xla_fusion's chains) running on a compute
# thread; its ops carry no "name:OpType".
XLA_RUN = "CpuExecutable::ExecuteAsyncOnStream"


def op_intervals(trace_dir: str) -> list[tuple[int, int, str]]:
    """`(start_ps, end_ps, op_type)` of every op on TensorFlow's compute threads, each run of
    an XLA-compiled call one "op" of type "XLA (fused chains)"."""
    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(glob.glob(f"{trace_dir}/**/*.xplane.pb",
                                         recursive=True)[0]).read_bytes())
    found = []
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = names.get(event.metadata_id, "")
                start = line.timestamp_ns * 1000 + event.offset_ps
                if ":" in name and "::" not in name:  # "scope/op_name:OpType", no executor
                    found.append((start, start + event.duration_ps, name.rsplit(":", 1)[1]))
                elif name == XLA_RUN:
                    found.append((start, start + event.duration_ps, "XLA (fused chains)"))
    return sorted(found)


def union_ps(intervals: list[tuple[int, int, str]]) -> int:
    """The time covered by at least one of the (sorted) intervals."""
    covered, begin, end = 0, 0, None
    for start, stop, _ in intervals:
        if end is not None and start <= end:
            end = max(end, stop)
            continue
        if end is not None:
            covered += end - begin
        begin, end = start, stop
    return covered if end is None else covered + end - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", choices=("vit-tiny-train", "vit-tiny-infer"),
                        default="vit-tiny-train")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--precision", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--top", type=int, default=25, help="op types printed")
    parser.add_argument("--output", type=Path,
                        help="default: benchmarks/results/step_profile-WORK-HOST-DATE.json")
    args = parser.parse_args()
    os.environ["ZOO_BENCH_PRECISION"] = args.precision  # read by keras_vit_step's policy
    step, batch = keras_vit_step(args.work, "zoo")
    for _ in range(3):
        step()
    with tempfile.TemporaryDirectory() as trace_dir:
        tf.profiler.experimental.start(trace_dir)
        for _ in range(args.steps):
            step()
        tf.profiler.experimental.stop()
        intervals = op_intervals(trace_dir)
    per_step = 1e9 * args.steps  # picoseconds to milliseconds a step
    by_type: collections.Counter = collections.Counter()
    for start, stop, op_type in intervals:
        by_type[op_type] += (stop - start) / per_step
    span = (max(stop for _, stop, _ in intervals) - intervals[0][0]) / per_step
    busy = union_ps(intervals) / per_step
    products = union_ps([i for i in intervals if any(p in i[2] for p in PRODUCTS)]) / per_step
    for op_type, ms in by_type.most_common(args.top):
        print(f"{ms:9.1f} ms  {op_type}")
    print(f"a step: span {span:.1f} ms, some op running {busy:.1f} ms, some matrix product "
          f"running {products:.1f} ms ({products / span:.0%} of the span); {batch} images")
    write_benchmark(__file__, {
        "work": args.work, "precision": args.precision, "batch": batch, "steps": args.steps,
        "span_ms": round(span, 1), "busy_ms": round(busy, 1),
        "matrix_products_ms": round(products, 1),
        "op_type_ms": {k: round(v, 2) for k, v in by_type.most_common()}},
        variant=args.work + ("-bfloat16" if args.precision == "bfloat16" else ""),
        output=args.output)


if __name__ == "__main__":
    main()
