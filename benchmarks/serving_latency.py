"""Size and CPU latency of an exported SavedModel's `serving_default`, batch 1 and 32.

    python benchmarks/serving_latency.py translator-multi30k-en-de [--repeats 20]
    python benchmarks/serving_latency.py vit-cifar10

Exports the model (beam 4 for the translator) into a temporary repository, loads it with
`tf.saved_model.load` as a server would, warms it up, then times the signature: the median
of `--repeats` calls per batch size. Translator inputs are real Multi30k test sentences (the
first 32), ViT inputs real CIFAR-10 JPEGs; both read from ../shared/data. Writes
benchmarks/results/serving_latency-<model>.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from zoo.bench.workers import DATA  # the zoo's shared data folder


def inputs_for(name: str, model_kind: str, count: int):
    import tensorflow as tf

    if model_kind == "translator":
        with gzip.open(DATA / "multi30k" / "test_2016_flickr.en.gz", "rt") as f:
            lines = [next(f).strip() for _ in range(count)]
        return {"sentences": tf.constant(lines)}
    import tarfile

    data = []
    with tarfile.open(DATA / "cifar10" / "cifar10-train-jpg.tar.gz") as archive:
        for member in archive:
            if member.isfile() and member.name.endswith(".jpg"):
                data.append(archive.extractfile(member).read())
            if len(data) == count:
                break
    return {"images": tf.constant(data)}


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()

    import tensorflow as tf

    import zoo
    from zoo.bench.report import results_path, write_results
    from zoo.serving.export import export_model

    kind = zoo.list_models().get(args.model, {}).get("kind") or (
        "translator" if "translator" in args.model else "vit")
    with tempfile.TemporaryDirectory() as tmp:
        version = export_model(args.model, tmp, version=1, name="bench")
        size = folder_size(version)
        serve = tf.saved_model.load(str(version)).signatures["serving_default"]
        result = {"model": args.model, "savedmodel_bytes": size,
                  "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                  "tensorflow": tf.__version__, "repeats": args.repeats, "latency_ms": {}}
        for batch in (1, 32):
            feed = inputs_for(args.model, kind, batch)
            serve(**feed)  # warm-up
            times = []
            for _ in range(args.repeats):
                started = time.perf_counter()
                out = serve(**feed)
                next(iter(out.values())).numpy()
                times.append((time.perf_counter() - started) * 1000)
            result["latency_ms"][f"batch_{batch}"] = {
                "median": round(statistics.median(times), 1), "min": round(min(times), 1)}
    write_results(result, results_path(f"serving_latency-{args.model}"))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
