"""Two translator exports served in one process, their calls alternating: sentences/s of each.

Each export runs as TensorFlow Serving runs it (`zoo.serving.session.ServedModel`: a TF1
session, warm-up replayed); `--xla` names the exports that need XLA switched on to run at all
(exports written before the cache writes stopped using `XlaDynamicUpdateSlice`), the others
run with XLA off, as the stock server runs everything. Rounds alternate the two exports, so
that both see the same machine load; the medians of the per-round rates and of their ratios
are printed and written as JSON.

    python benchmarks/served_ab.py OLD/1 NEW/1 --xla OLD/1 --batch 1 --batch 32 \
        --output benchmarks/results/served-ab.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from zoo.bench.workers import DATA  # noqa: E402
from zoo.serving.session import ServedModel, set_xla_compilation  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("exports", nargs=2, help="two export version folders (A and B)")
    parser.add_argument("--xla", action="append", default=[],
                        help="an export that runs only with XLA on (repeatable)")
    parser.add_argument("--batch", type=int, action="append", default=None)
    parser.add_argument("--sentences", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    batches = args.batch or [1, 32]
    with gzip.open(DATA / "multi30k" / "test_2016_flickr.en.gz", "rt") as f:
        sentences = [next(f).strip() for _ in range(args.sentences)]
    needs_xla = {str(Path(p)) for p in args.xla}
    models = []
    for path in args.exports:
        set_xla_compilation(str(Path(path)) in needs_xla)
        models.append(ServedModel(path))

    def run(index: int, batch: int) -> float:
        set_xla_compilation(str(Path(args.exports[index])) in needs_xla)
        started = time.perf_counter()
        for i in range(0, len(sentences), batch):
            models[index](sentences=sentences[i:i + batch])
        return len(sentences) / (time.perf_counter() - started)

    results = {"exports": args.exports, "xla": sorted(needs_xla), "batches": {}}
    for batch in batches:
        run(0, batch), run(1, batch)  # warm-up
        rates: list[list[float]] = [[], []]
        for _ in range(args.rounds):
            for index in (0, 1):
                rates[index].append(run(index, batch))
        ratios = [b / a for a, b in zip(*rates)]
        results["batches"][batch] = {
            "a": statistics.median(rates[0]), "b": statistics.median(rates[1]),
            "b_over_a": statistics.median(ratios), "rounds": rates}
        print(f"batch {batch}: A {statistics.median(rates[0]):.1f}  "
              f"B {statistics.median(rates[1]):.1f} sentences/s  "
              f"B/A {statistics.median(ratios):.3f}", flush=True)
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
