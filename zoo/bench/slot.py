"""What `benchmarks/gpu_slot.sh` makes of its bench: which jobs measured, which failed, which
were skipped.

    python -m zoo.bench.slot bench-gpu.json WORK [WORK ...]

prints one line per (work, system, backend) that the works plan, `ok`, `skipped` or `failed`
with its reason, and exits 1 when one of the zoo's own jobs has no rate. The peers (timm,
keras-hub, Hugging Face, ...) are optional on a lent machine: one that is not installed, or
whose worker fails, is skipped and said so, and the loan goes on. The zoo's own measurement is
what the loan is for: without it the command fails, naming the job.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from zoo.bench.harness import missing_modules
from zoo.bench.works import WORKS, expand_works

OWN_SYSTEM = "zoo"


def bench_outcomes(results: Sequence[dict], works: Sequence[str],
                   missing: Callable[[str], list[str]] = missing_modules
                   ) -> list[tuple[str, str, str]]:
    """`(job, status, detail)` for every job that `works` plan, in their order.

    Args:
        results: the `results` of a `zoo bench` JSON document.
        works: the works (or groups) the bench was asked for.
        missing: the modules a system lacks (tests pass a fake).

    Returns:
        A status of "ok" (the detail: the best rate and its unit), "skipped" (a peer that is
        not installed, or whose worker failed; the detail says why) or "failed" (one of the
        zoo's own jobs without a rate, with the worker's error, or that never ran).

    Example:
        >>> bench_outcomes([{"work": "mt-greedy", "system": "zoo", "backend": "jax",
        ...                  "rate": 310.0, "unit": "tokens/s"}], ["mt-greedy"],
        ...                missing=lambda system: [])[1]
        ('zoo (jax) mt-greedy', 'ok', '310 tokens/s')
    """
    outcomes = []
    for work in expand_works(works):
        for system, backend in WORKS[work].runs:
            job = f"{system} ({backend}) {work}"
            entries = [r for r in results if (r.get("work"), r.get("system"),
                                              r.get("backend")) == (work, system, backend)]
            rates = [r for r in entries if r.get("rate") is not None]
            if rates:
                best = max(rates, key=lambda r: r["rate"])
                outcomes.append((job, "ok", f"{best['rate']:.3g} {best.get('unit', '')}".strip()))
                continue
            if entries:
                detail = "; ".join(str(r.get("error") or r.get("skipped") or "no rate")
                                   for r in entries)
            else:
                absent = missing(system)
                detail = (f"not installed ({', '.join(absent)})" if absent
                          else "no result: the bench stopped before it")
            status = "failed" if system == OWN_SYSTEM else "skipped"
            outcomes.append((job, status, detail))
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    """Prints the outcome of every planned job of a bench JSON; 1 where the zoo's failed."""
    parser = argparse.ArgumentParser(prog="python -m zoo.bench.slot", description=__doc__)
    parser.add_argument("results", help="the JSON file that `zoo bench --output` wrote")
    parser.add_argument("works", nargs="+", help="the works the bench was asked for")
    args = parser.parse_args(argv)
    path = Path(args.results)
    if not path.is_file():
        print(f"bench: failed: no results file {path}")
        return 1
    results = json.loads(path.read_text()).get("results", [])
    outcomes = bench_outcomes(results, args.works)
    for job, status, detail in outcomes:
        print(f"bench {job}: {status}: {detail}")
    return 1 if any(status == "failed" for _, status, _ in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
