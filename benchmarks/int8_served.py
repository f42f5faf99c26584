"""int8 exports against float32, served as the model server serves them: which int8 route
to serve, and whether int8 pays on this CPU.

    python benchmarks/int8_served.py translator-multi30k-en-de [--rounds 5]
    python benchmarks/int8_served.py vit-cifar10 [--rounds 5]

Exports the shipped model three ways into a temporary folder: `float32`; `int8-products`,
every product of the int8 export int8 x int8 (Keras' own int8 route, inputs quantized per
row); `int8-widened`, every product float against the int8 weights widened at call time
(the zoo's route on TensorFlow, served and in Python). Then switches XLA compilation off, loads each
into a TF1 session with its warm-up records replayed (`zoo.serving.session.ServedModel`,
as the server runs it), and times `serving_default` at batch 1 and 32 on real test inputs,
the variants interleaved round by round in this one process (so that a busy neighbour
slows all of them alike). Medians over the rounds; writes
benchmarks/results/int8_served-<model>.json with the CPU's name and its int8 features.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # serving_latency, beside this

VARIANTS = ("float32", "int8-products", "int8-widened")
BATCHES = (1, 32)


def export_variant(name: str, variant: str, folder: str) -> Path:
    """`name` exported as `variant` into `folder`; returns the version folder."""
    import zoo
    from zoo.layers.int8_route import int8_products
    from zoo.models.quantization import quantize_model
    from zoo.serving.export import export_model

    model = zoo.load(name)
    if variant != "float32":
        quantize_model(model)
    route = int8_products() if variant == "int8-products" else contextlib.nullcontext()
    with route:
        return export_model(model, folder, name=variant)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", choices=["translator-multi30k-en-de", "vit-cifar10"])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from serving_latency import folder_size, inputs_for
    from zoo.bench.report import device, results_path, write_results
    from zoo.models.quantization import cpu_features
    from zoo.serving.session import ServedModel, set_xla_compilation

    kind = "translator" if "translator" in args.model else "vit"
    feeds = {batch: {key: value.numpy() for key, value in
                     inputs_for(args.model, kind, batch).items()} for batch in BATCHES}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        versions = {v: export_variant(args.model, v, tmp) for v in VARIANTS}
        set_xla_compilation(False)  # as the model server runs, from here on
        served = {v: ServedModel(versions[v]) for v in VARIANTS}
        times: dict = {(v, b): [] for v in VARIANTS for b in BATCHES}
        for _ in range(args.rounds + 1):  # the first round warms up, untimed
            for batch in BATCHES:
                for variant in VARIANTS:
                    started = time.perf_counter()
                    served[variant](**feeds[batch])
                    times[variant, batch].append(time.perf_counter() - started)
        timings = {v: {"variables_bytes": folder_size(versions[v] / "variables"),
                       **{f"batch_{b}_ms": round(statistics.median(
                           times[v, b][1:]) * 1000, 1) for b in BATCHES}}
                   for v in VARIANTS}
    result = {"model": args.model, "timings": timings, "rounds": args.rounds,
              "machine": device(), "cpu_int8_features": cpu_features(),
              "xla": "off (as the model server)",
              "load_average": {"before": round(load_before, 2),
                               "after": round(os.getloadavg()[0], 2)},
              "command": f"python benchmarks/int8_served.py {args.model} "
                         f"--rounds {args.rounds}"}
    write_results(result, results_path(f"int8_served-{args.model}"))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
