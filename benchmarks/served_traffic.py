"""Concurrent traffic to the served exports, as the model server's session takes it: client
threads sending requests at once to one TF1 session per export, in one process, XLA off,
warm-up replayed (`zoo.serving.session.ServedModel`).

    python benchmarks/served_memory.py prepare --output /tmp/served   # the exports
    python benchmarks/served_traffic.py /tmp/served --seconds 4 [--output FOLDER]

For each export and 1, 8 and 32 client threads: each thread sends requests of 1 to 4 items
(real sentences or CIFAR-10 JPEGs, `zoo.bench.real_inputs`, drawn at random, so that every
item meets different neighbours) for `--seconds` (`zoo.bench.latency.concurrent_calls`);
reported are items a second, the p50 and p99 latency of a request, the process's peak
resident memory during that run (`zoo.bench.memory.PeakMemory`: the kernel's high-water
mark, reset before it), and how many items' answers differ from the item's answer alone
(strings equal, numbers within 1e-5): the check that an answer does not depend on its
neighbours. One request at a time, one export against another, is
benchmarks/serving_latency.py's. Writes benchmarks/results/served_traffic-HOST-DATE.json
(`--output`: a folder or a file).
"""

from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from zoo.bench.latency import concurrent_calls
from zoo.bench.memory import PeakMemory
from zoo.bench.real_inputs import as_request, items_of
from zoo.bench.report import write_benchmark

# export folder under the repository: the kind of items its `serving_default` takes (also
# the name of its input)
EXPORTS = {
    "translator-multi30k-en-de/1": "sentences",
    "all-minilm-l6-v2/1": "sentences",
    "vit-cifar10/1": "images",
    "vit-cifar-vgg/1": "images",
}


def same(answer: dict, row: int, expected: dict) -> bool:
    """Whether row `row` of `answer` equals the single-item answer `expected`."""
    for key, value in expected.items():
        got, value = np.asarray(answer[key][row]), np.asarray(value)
        if value.dtype.kind not in "fc":  # strings, ids: equal
            if not np.array_equal(got, value):
                return False
        elif not np.allclose(got, value, rtol=0, atol=1e-5):
            return False
    return True


def run_clients(model: Any, kind: str, pool: list[Any], alone: list[dict], threads: int,
                seconds: float) -> dict:
    """`threads` clients sending requests of 1 to 4 items for `seconds`; their figures."""
    mismatched: list[int] = []
    lock = threading.Lock()
    rngs = [np.random.default_rng(seed) for seed in range(threads)]

    def request(client: int) -> int:
        rng = rngs[client]
        chosen = rng.choice(len(pool), size=int(rng.integers(1, 5)), replace=False)
        answer = model(**{kind: as_request([pool[i] for i in chosen])})
        wrong = [int(i) for row, i in enumerate(chosen) if not same(answer, row, alone[i])]
        with lock:
            mismatched.extend(wrong)
        return len(chosen)

    with PeakMemory() as memory:
        traffic = concurrent_calls(request, threads, seconds)
    return {**traffic.summary(), "peak_mb": round(memory.peak_mb),
            "items_differing": len(mismatched), "differing": sorted(set(mismatched))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repository", type=Path, help="`served_memory.py prepare`'s output")
    parser.add_argument("--seconds", type=float, default=4.0, help="per export and threads")
    parser.add_argument("--threads", type=int, action="append", default=None)
    parser.add_argument("--items", type=int, default=24, help="distinct items per export")
    parser.add_argument("--output", help="a folder, or a file (default benchmarks/results/)")
    args = parser.parse_args(argv)
    from zoo.serving.session import ServedModel, set_xla_compilation

    set_xla_compilation(False)
    results = []
    for folder, kind in EXPORTS.items():
        if not (args.repository / folder).is_dir():
            print(f"{folder}: not exported; skipped")
            continue
        model = ServedModel(args.repository / folder)
        pool = items_of(kind, args.items)
        alone = []
        for item in pool:  # each item's answer alone, one request at a time
            answer = model(**{kind: as_request([item])})
            alone.append({key: value[0] for key, value in answer.items()})
        for threads in args.threads or [1, 8, 32]:
            result = {"export": folder,
                      **run_clients(model, kind, pool, alone, threads, args.seconds)}
            print(json.dumps(result), flush=True)
            results.append(result)
        model.session.close()
    write_benchmark(__file__, {"settings": {"seconds": args.seconds, "items": args.items,
                                            "threads": args.threads or [1, 8, 32]},
                               "results": results}, output=args.output)


if __name__ == "__main__":
    main()
