"""Latency of exports as the model server serves them, interleaved in one process: a model's
float32 and int8 exports, or export folders against each other (A/B).

    python benchmarks/serving_latency.py translator-multi30k-en-de [--rounds 5]
    python benchmarks/serving_latency.py vit-cifar10 --variant float32 \
        --variant int8-widened --variant int8-products          # the int8 routes served
    python benchmarks/serving_latency.py OLD/1 NEW/1 --xla OLD/1 --label beam4   # A/B

Each SUBJECT is a model that `zoo export` takes (a shipped name, a .keras file), exported
into a temporary folder once per `--variant` (the translator with `--beam-size`, 4 by
default), or an export's version folder, served as it is. Variants: `float32`;
`int8-widened`, quantized (`zoo.models.quantization.quantize_model`), every product float
against the int8 weights widened at call time (the zoo's route on TensorFlow, served and in
Python: `zoo.layers.int8_route`); `int8-products`, every product int8 x int8 (Keras' own
route, inputs quantized per row, forced by `int8_products()`).

Every export is loaded into a TF1 session with its warm-up replayed and XLA compilation off,
as the stock model server runs it (`zoo.serving.session.ServedModel`); `--xla` names the
export folders that run only with XLA on (exports written before 2026-11-26 wrote their
caches with `XlaDynamicUpdateSlice`). A request is the first `--batch` real test inputs
(Multi30k sentences or CIFAR-10 JPEGs, `zoo.bench.real_inputs`). After one untimed call
each, every round calls each export once, the order reversed every other round
(`zoo.bench.steps.interleaved`), so that a busy neighbour slows all alike. Reported per
export and batch: the median and fastest milliseconds of the rounds, items a second, and the
median of the rounds' ratios to the first export (above 1: slower than it); per export its
size. Writes benchmarks/results/serving_latency-LABEL-HOST-DATE.json (`--output`: a folder
or a file); LABEL is the first model's name (with `-int8` where an int8 variant ran), or `ab`
for export folders.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
from pathlib import Path

import numpy as np

from zoo.bench.real_inputs import as_request, items_of
from zoo.bench.report import write_benchmark
from zoo.bench.steps import interleaved

VARIANTS = ("float32", "int8-widened", "int8-products")


def folder_size(path: Path) -> int:
    """Bytes of the files under `path`."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def export_variant(name: str, variant: str, folder: str, number: int, beam_size: int) -> Path:
    """Model `name` exported as `variant` into `folder`; returns the version folder."""
    import zoo
    from zoo.layers.int8_route import int8_products
    from zoo.models.quantization import quantize_model
    from zoo.serving.export import export_model

    model = zoo.load(name)
    if variant != "float32":
        quantize_model(model)
    route = int8_products() if variant == "int8-products" else contextlib.nullcontext()
    with route:
        return export_model(model, folder, name=f"subject{number}-{variant}",
                            beam_size=beam_size)


def exports_to_serve(args: argparse.Namespace, folder: str) -> dict[str, tuple[Path, dict]]:
    """`{label: (version folder, what it is)}`: each subject's exports, in the order given."""
    found = {}
    for number, subject in enumerate(args.subjects):
        if (Path(subject) / "saved_model.pb").is_file():
            found[subject] = (Path(subject), {"export": subject})
            continue
        for variant in args.variant or ["float32"]:
            found[f"{subject} {variant}"] = (
                export_variant(subject, variant, folder, number, args.beam_size),
                {"model": subject, "variant": variant})
    return found


def request_of(model, batch: int) -> dict[str, np.ndarray]:
    """The first `batch` real items of the kind the export's `serving_default` takes."""
    kind = next(iter(model.signatures["serving_default"].inputs))
    return {kind: as_request(items_of(kind, batch))}


def time_exports(exports: dict[str, tuple[Path, dict]], needs_xla: set[str],
                 batches: list[int], rounds: int) -> dict[str, dict]:
    """Each export's size and, per batch, its latency over interleaved rounds."""
    from zoo.serving.session import ServedModel, set_xla_compilation

    served, xla = {}, {}
    for label, (version, _) in exports.items():
        xla[label] = str(version.resolve()) in needs_xla
        set_xla_compilation(xla[label])
        served[label] = ServedModel(version)
    results = {label: {**what, "xla": xla[label],
                       "variables_bytes": folder_size(version / "variables"),
                       "savedmodel_bytes": folder_size(version)}
               for label, (version, what) in exports.items()}
    for batch in batches:
        steps = {}
        for label, model in served.items():
            feed = request_of(model, batch)

            def step(model=model, feed=feed, on=xla[label]):
                if needs_xla:  # the server's setting, export by export
                    set_xla_compilation(on)
                model(**feed)

            step()  # untimed: the first call of this size
            steps[label] = step
        seconds = interleaved(steps, rounds)
        first = seconds[next(iter(seconds))]
        for label, times in seconds.items():
            median = statistics.median(times)
            results[label][f"batch_{batch}"] = {
                "median_ms": round(1000 * median, 2), "min_ms": round(1000 * min(times), 2),
                "items_per_s": round(batch / median, 2),
                "ratio_to_first": round(statistics.median(
                    t / f for t, f in zip(times, first)), 3)}
            print(f"batch {batch:3d}  {label:45s} {1000 * median:10.1f} ms", flush=True)
    return results


def result_label(args: argparse.Namespace) -> str:
    """`--label`, else the first model's name (`-int8` added where an int8 variant ran), or
    `ab` where every subject is an export folder."""
    models = [s for s in args.subjects if not (Path(s) / "saved_model.pb").is_file()]
    if args.label or not models:
        return args.label or "ab"
    int8 = set(args.variant or ["float32"]) != {"float32"}
    return Path(models[0]).stem + ("-int8" if int8 else "")


def main(argv: list[str] | None = None) -> None:
    """Exports, serves and times the subjects; writes the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("subjects", nargs="+", help="models to export, or version folders")
    parser.add_argument("--variant", action="append", choices=VARIANTS,
                        help="how each model is exported (repeatable; default float32)")
    parser.add_argument("--xla", action="append", default=[],
                        help="an export folder that runs only with XLA on (repeatable)")
    parser.add_argument("--batch", type=int, action="append",
                        help="inputs a request (repeatable; default 1 and 32)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--beam-size", type=int, default=4, help="a translator's search")
    parser.add_argument("--label", help="the result's name after the script's")
    parser.add_argument("--output", help="a folder, or a file (default benchmarks/results/)")
    args = parser.parse_args(argv)
    from zoo.models.quantization import cpu_features
    from zoo.serving.session import set_xla_compilation

    batches = args.batch or [1, 32]
    needs_xla = {str(Path(p).resolve()) for p in args.xla}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        exports = exports_to_serve(args, folder)
        set_xla_compilation(False)  # as the model server runs, from here on
        results = time_exports(exports, needs_xla, batches, args.rounds)
    write_benchmark(__file__, {
        "settings": {"subjects": args.subjects, "variants": args.variant or ["float32"],
                     "batches": batches, "rounds": args.rounds, "beam_size": args.beam_size,
                     "xla_on": sorted(needs_xla), "served": "TF1 session, warm-up replayed"},
        "exports": results, "cpu_int8_features": cpu_features(),
        "load_average": {"before": round(load_before, 2),
                         "after": round(os.getloadavg()[0], 2)},
    }, variant=result_label(args), output=args.output)


if __name__ == "__main__":
    main()
