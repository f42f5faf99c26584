"""Concurrent traffic to the served exports, as the model server's session takes it: client
threads sending requests at once to one TF1 session per export, in one process, XLA off,
warm-up replayed (`zoo.serving.session.ServedModel`).

    python benchmarks/served_memory.py prepare --output /tmp/served   # the exports
    python benchmarks/served_traffic.py /tmp/served --seconds 4 \
        --output benchmarks/results/served_traffic-avx512-2026-11-27.json

For each export and 1, 8 and 32 client threads: each thread sends requests of 1 to 4 items
(real sentences or CIFAR-10 JPEGs, drawn at random, so that every item meets different
neighbours) for `--seconds`; reported are items a second, the p50 and p99 latency of a
request, the process's peak resident memory during that run (the kernel's high-water mark,
reset before it), and how many items' answers differ from the item's answer alone (strings
equal, numbers within 1e-5): the check that an answer does not depend on its neighbours.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from zoo.bench.workers import DATA  # noqa: E402

# export folder under the repository: the kind of items its `serving_default` takes (also
# the name of its input)
EXPORTS = {
    "translator-multi30k-en-de/1": "sentences",
    "all-minilm-l6-v2/1": "sentences",
    "vit-cifar10/1": "images",
    "vit-cifar-vgg/1": "images",
}


def items(kind: str, count: int) -> list[Any]:
    """`count` real items: test_2016_flickr sentences, or CIFAR-10 training JPEGs."""
    if kind == "sentences":
        with gzip.open(DATA / "multi30k" / "test_2016_flickr.en.gz", "rt") as f:
            return [next(f).strip() for _ in range(count)]
    found = []
    with tarfile.open(DATA / "cifar10" / "cifar10-train-jpg.tar.gz") as archive:
        for member in archive:
            if member.isfile() and member.name.endswith(".jpg"):
                found.append(archive.extractfile(member).read())
                if len(found) == count:
                    return found
    return found


def feed(kind: str, chosen: list[Any]) -> np.ndarray:
    """A request's input: sentences as UTF-8 bytes, or encoded images."""
    values = [v.encode() if isinstance(v, str) else v for v in chosen]
    return np.array(values, dtype=object)


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


def high_water_mb() -> float:
    """This process's peak resident memory (VmHWM) in MB."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_clients(model: Any, name: str, kind: str, pool: list[Any], alone: list[dict],
                threads: int, seconds: float) -> dict:
    """`threads` clients sending requests of 1 to 4 items for `seconds`; their figures."""
    latencies, mismatched, counted = [], [], [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def client(seed: int) -> None:
        rng = np.random.default_rng(seed)
        while time.perf_counter() < deadline:
            chosen = rng.choice(len(pool), size=int(rng.integers(1, 5)), replace=False)
            start = time.perf_counter()
            answer = model(**{name: feed(kind, [pool[i] for i in chosen])})
            took = time.perf_counter() - start
            wrong = [int(i) for row, i in enumerate(chosen) if not same(answer, row, alone[i])]
            with lock:
                latencies.append(took)
                mismatched.extend(wrong)
                counted[0] += len(chosen)

    open("/proc/self/clear_refs", "w").write("5")  # the high-water mark starts again here
    began = time.perf_counter()
    workers = [threading.Thread(target=client, args=(seed,)) for seed in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - began
    ordered = sorted(latencies)
    return {"threads": threads, "requests": len(latencies), "items": counted[0],
            "items_per_s": round(counted[0] / elapsed, 2),
            "p50_ms": round(1000 * statistics.median(ordered), 1),
            "p99_ms": round(1000 * ordered[min(len(ordered) - 1,
                                               int(0.99 * len(ordered)))], 1),
            "peak_mb": round(high_water_mb()), "items_differing": len(mismatched),
            "differing": sorted(set(mismatched))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repository", type=Path, help="`served_memory.py prepare`'s output")
    parser.add_argument("--seconds", type=float, default=4.0, help="per export and threads")
    parser.add_argument("--threads", type=int, action="append", default=None)
    parser.add_argument("--items", type=int, default=24, help="distinct items per export")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    from zoo.bench.report import device, versions, write_results
    from zoo.serving.session import ServedModel, set_xla_compilation

    set_xla_compilation(False)
    results = []
    for folder, kind in EXPORTS.items():
        if not (args.repository / folder).is_dir():
            print(f"{folder}: not exported; skipped")
            continue
        model = ServedModel(args.repository / folder)
        pool = items(kind, args.items)
        alone = []
        for item in pool:  # each item's answer alone, one request at a time
            answer = model(**{kind: feed(kind, [item])})
            alone.append({key: value[0] for key, value in answer.items()})
        for threads in args.threads or [1, 8, 32]:
            result = {"export": folder, **run_clients(model, kind, kind, pool, alone,
                                                       threads, args.seconds)}
            print(json.dumps(result), flush=True)
            results.append(result)
        model.session.close()
    if args.output:
        write_results({"device": device(), "versions": versions(), "results": results},
                      args.output)


if __name__ == "__main__":
    main()
