"""The host's peak, and every work's rate as a fraction of it.

`zoo bench` runs the `peak` work beside the others (interleaved with them, its best round
kept, as every job's): a square matrix product, 4096 x 4096 by 4096 x 4096 on a CPU (8192 on
a GPU), in float32 and in bfloat16, on each backend the other works use (TensorFlow with
oneDNN as the zoo runs it, JAX/XLA, PyTorch), timed by `zoo.bench.steps.measure`. Nothing
does more useful arithmetic per second on a host than one large product, so its rate is the
limit that a work's achieved FLOP/s (`zoo.bench.works.flops_per_unit` times its rate) is
measured against: `with_fractions` adds `flops_per_unit`, `achieved_gflops`, `peak_gflops`
and `fraction_of_peak` to every result that has a count, against the peak of its own backend
in its own precision (a bfloat16 work's: the faster of bfloat16 and float32; CTranslate2,
whose products the bench cannot call alone, against the best backend's), and
`format_fractions` prints them.

A product the host computes slowly (PyTorch's bfloat16 where the CPU lacks AVX-512 BF16 and
AMX: docs/benchmarks.md, "A CPU without native bfloat16") is measured smaller: `peak_size`
times one 1024^3 product and halves the side until a call fits in the job's seconds; the
result's `detail` names the size.

This module imports nothing heavy; `measure_peak` imports its backend when it runs.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from zoo.bench.works import PEAK_BACKENDS, PEAK_SYSTEM, SYSTEMS, WORKS, flops_per_unit
from zoo.bench.flops import matmul_flops

SIZES = {"cpu": 4096, "gpu": 8192, "dry_run": 256}
SMALLEST = 1024  # the size `peak_size` times first, and the least it measures at
PRECISIONS = ("float32", "bfloat16")


def _size(where: str, dry_run: bool) -> int:
    return SIZES["dry_run"] if dry_run else SIZES["gpu" if where in ("gpu", "cuda") else "cpu"]


def _matmul_step(backend: str, precision: str, dry_run: bool, side: int | None = None
                 ) -> tuple[Callable[[], Any], int, str]:
    """`(step, size, device)`: one `size`-square product of random matrices in `precision`
    on `backend`'s first device, finished before `step` returns; `size` is `side` where given,
    else the device's (`SIZES`)."""
    import numpy as np

    def size_on(where: str) -> int:
        return side or _size(where, dry_run)

    def operands(where: str) -> tuple[Any, Any]:
        size = size_on(where)
        rng = np.random.default_rng(0)
        return tuple(rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))

    if backend == "tensorflow":
        import tensorflow as tf

        a, b = (tf.cast(tf.constant(m), precision) for m in operands("cpu"))
        return lambda: tf.linalg.matmul(a, b)[0, 0].numpy(), size_on("cpu"), "cpu"
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        where = jax.devices()[0].platform
        a, b = (jnp.asarray(m, dtype=precision) for m in operands(where))
        product = jax.jit(jnp.matmul)
        return lambda: product(a, b).block_until_ready(), size_on(where), where
    if backend == "torch":
        import torch

        where = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        a, b = (torch.from_numpy(m).to(where, getattr(torch, precision))
                for m in operands(where.type))

        def step() -> None:
            torch.mm(a, b)
            if where.type == "cuda":
                torch.cuda.synchronize()

        return step, size_on(where.type), where.type
    raise ValueError(f"no peak measurement for backend {backend!r}; expected one of "
                     f"{', '.join(PEAK_BACKENDS)}")


def peak_size(call_seconds: float, full: int, seconds: float) -> int:
    """The side of the product to measure the peak with: `full`, halved (down to `SMALLEST`)
    while a call would take longer than `seconds` (at least one second), from `call_seconds`,
    one `SMALLEST`-side call's time (a call's work grows as the cube of its side)."""
    size = full
    while size > SMALLEST and call_seconds * (size / SMALLEST) ** 3 > max(seconds, 1.0):
        size //= 2
    return size


def measure_peak(backend: str, seconds: float, dry_run: bool = False) -> list[dict]:
    """The `peak` work's job on `backend`: one result per precision, `variant` the precision,
    `rate` in GFLOP/s, `detail` the product's size and device (smaller than `SIZES` says
    where a call would take longer than `seconds`: `peak_size`)."""
    from zoo.bench.steps import measure

    results = []
    for precision in PRECISIONS:
        side = None
        if not dry_run:
            probe, _, where = _matmul_step(backend, precision, dry_run, SMALLEST)
            probe()  # the first call's set-up is not the product's time
            call_seconds = 1.0 / measure(probe, 1, 0.0, warmup=0, min_calls=1)
            side = peak_size(call_seconds, _size(where, dry_run), seconds)
        step, size, where = _matmul_step(backend, precision, dry_run, side)
        rate = measure(step, matmul_flops(size), seconds, warmup=1, min_calls=2) / 1e9
        results.append({"variant": precision, "rate": rate, "unit": WORKS["peak"].unit,
                        "detail": f"{size}^3 product on {where}", "precision": precision})
    return results


def peak_precision(result: dict) -> str:
    """"bfloat16" for a result that ran its products in bfloat16 (its `precision` or, for
    CTranslate2's compute types, its `variant` says so), else "float32"."""
    said = f"{result.get('precision', '')} {result.get('variant') or ''}"
    return "bfloat16" if "bfloat16" in said else "float32"


def peaks(results: Sequence[dict]) -> dict[tuple[str, str], float]:
    """`{(backend, precision): GFLOP/s}` of the `peak` results that have a rate, and
    `("best", precision)`: the highest of each precision."""
    found: dict[tuple[str, str], float] = {}
    for r in results:
        if r["work"] == "peak" and r.get("rate") is not None:
            found[(r["backend"], r["variant"])] = r["rate"]
            best = found.get(("best", r["variant"]), 0.0)
            found[("best", r["variant"])] = max(best, r["rate"])
    return found


def limit(measured: dict[tuple[str, str], float], backend: str, precision: str
          ) -> tuple[float, str] | None:
    """`(GFLOP/s, precision)`: the peak a work of `precision` on `backend` is measured against,
    from `measured` (`peaks`); None where neither was measured. A bfloat16 work's is the faster
    of bfloat16's and float32's: a CPU without native bfloat16 computes its products slower
    than float32's, and the work could always run in float32."""
    tried = (precision, "float32") if precision == "bfloat16" else (precision,)
    options = [(measured[backend, p], p) for p in tried if measured.get((backend, p))]
    return max(options) if options else None


def with_fractions(results: Sequence[dict], dry_run: bool = False) -> list[dict]:
    """Copies of `results`, each with a FLOP count (`zoo.bench.works.flops_per_unit`) given
    `flops_per_unit` and, where it has a rate, `achieved_gflops`; and where the peak of its
    backend (else the best backend's) in its precision was measured, `peak_gflops`,
    `peak_of` (`"<backend> <precision>"`) and `fraction_of_peak`. A bfloat16 work's peak is
    the higher of its backend's bfloat16 and float32 peaks (on a CPU without native bfloat16
    the float32 one: there a bfloat16 product is the slower way to the same answer)."""
    measured = peaks(results)
    out = []
    for result in results:
        result = dict(result)
        count = flops_per_unit(result["work"], dry_run)
        if count is not None:
            result["flops_per_unit"] = count
        if count is not None and result.get("rate") is not None:
            result["achieved_gflops"] = result["rate"] * count / 1e9
            for backend in (result["backend"], "best"):
                found = limit(measured, backend, peak_precision(result))
                if found:
                    peak, of = found
                    result.update(peak_gflops=peak, peak_of=f"{backend} {of}",
                                  fraction_of_peak=result["achieved_gflops"] / peak)
                    break
        out.append(result)
    return out


def format_fractions(results: Sequence[dict]) -> str:
    """A Markdown table of the host's peaks (GFLOP/s per backend and precision), then one row
    per (work, variant, system, backend) with a count: GFLOP per unit, achieved GFLOP/s and
    the fraction of its peak. Empty when nothing has a count or a peak."""
    lines = []
    peak_rows = [r for r in results if r["work"] == "peak" and r.get("rate") is not None]
    if peak_rows:
        lines += ["| peak (square product) | backend | precision | GFLOP/s |",
                  "|---|---|---|---|"]
        lines += [f"| {r.get('detail', '')} | {r['backend']} | {r['variant']} | "
                  f"{r['rate']:,.1f} |" for r in peak_rows]
    rows = [r for r in results if r.get("achieved_gflops") is not None]
    if rows:
        order = {system: i for i, system in enumerate(list(SYSTEMS) + [PEAK_SYSTEM])}
        rows.sort(key=lambda r: (list(WORKS).index(r["work"]), order.get(r["system"], 99)))
        lines += ["", "| work | system (backend) | GFLOP per unit | GFLOP/s | of peak |",
                  "|---|---|---|---|---|"]
        for r in rows:
            work = r["work"] + (f", {r['variant']}" if r.get("variant") else "")
            share = (f"{100 * r['fraction_of_peak']:.0f}% of {r['peak_of']}"
                     if "fraction_of_peak" in r else "no peak measured")
            lines.append(f"| {work} | {r['system']} ({r['backend']}) | "
                         f"{r['flops_per_unit'] / 1e9:.4g} | {r['achieved_gflops']:,.1f} | "
                         f"{share} |")
    return "\n".join(lines).strip("\n")
