"""What `zoo bench` reports: the Markdown table of rates and ratios, the device and the
versions its JSON records, and where every benchmark of the zoo writes its JSON
(`results_path`, `write_results`). This module imports nothing heavy.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterable, Sequence

from zoo.bench.works import SYSTEMS, WORKS


def zoo_reference(results: Iterable[dict], work: str, variant: Any = None) -> float | None:
    """The zoo's fastest rate on `work` (the ratios' denominator)."""
    rates = [r["rate"] for r in results if r["work"] == work and r["system"] == "zoo"
             and r.get("variant") == variant and r["rate"] is not None]
    return max(rates) if rates else None


def _rate_text(rate: float) -> str:
    return f"{rate:,.0f}" if rate >= 10 else f"{rate:.2f}"


def format_table(results: Sequence[dict]) -> str:
    """A Markdown table: one row per (work, variant), one column per (system, backend); each
    cell the rate and, for peers, its ratio zoo / peer (above 1: the zoo is faster)."""
    columns: list[tuple[str, str]] = []
    for system in SYSTEMS:
        for r in results:
            if r["system"] == system and (system, r["backend"]) not in columns:
                columns.append((system, r["backend"]))
    rows: list[tuple[str, Any]] = []
    for r in results:
        if (r["work"], r.get("variant")) not in rows:
            rows.append((r["work"], r.get("variant")))
    header = ["work", "unit"] + [f"{s} ({b})" for s, b in columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for work, variant in rows:
        zoo_rate = zoo_reference(results, work, variant)
        cells = [work + (f", {variant}" if variant else ""), WORKS[work].unit]
        for system, backend in columns:
            match = [r for r in results if (r["work"], r.get("variant"), r["system"],
                                            r["backend"]) == (work, variant, system, backend)]
            if not match:
                cells.append("")
            elif match[0]["rate"] is None:
                cells.append("failed" if "error" in match[0] else "skipped")
            elif system == "zoo" or not zoo_rate:
                cells.append(_rate_text(match[0]["rate"]))
            else:
                rate = match[0]["rate"]
                cells.append(f"{_rate_text(rate)} (zoo {zoo_rate / rate:.2f}x)")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def gpu_names() -> list[str]:
    """The names of the GPUs that `nvidia-smi` lists (none where it is absent or fails)."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def device() -> str:
    """The CPU's model name and core count, and the GPUs' names where `nvidia-smi` gives
    them."""
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpus = gpu_names()
    return f"{name}, {os.cpu_count()} CPUs" + (f"; {', '.join(gpus)}" if gpus else "")


def versions() -> dict[str, str]:
    """Installed versions of the zoo's backends and of the peers (none imported)."""
    found = {"python": platform.python_version()}
    for package in ("attention-zoo", "keras", "tensorflow", "jax", "torch", "timm",
                    "keras-hub", "transformers", "ctranslate2"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def results_path(name: str) -> Path:
    """benchmarks/results/NAME.json beside the source tree (else under the current folder):
    where every benchmark of the zoo writes its JSON."""
    root = Path(__file__).resolve().parents[2]
    folder = root / "benchmarks" if (root / "benchmarks").is_dir() else Path("benchmarks")
    return folder / "results" / f"{name}.json"


def write_results(document: dict, path: str | os.PathLike) -> Path:
    """Writes `document` as indented JSON to `path` (its folder created; atomically, and
    never through a link); returns the path."""
    from zoo.training.file_store import write_atomically

    return write_atomically(path, lambda temporary: temporary.write_text(
        json.dumps(document, indent=2) + "\n"))


def default_output() -> Path:
    """benchmarks/results/bench-<UTC date>.json (see `results_path`)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    return results_path(f"bench-{stamp}")
