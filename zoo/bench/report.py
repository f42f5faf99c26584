"""What `zoo bench` reports: the Markdown table of rates and ratios, the device and the
versions its JSON records, and where and under what name every benchmark of the zoo writes
its JSON: `result_name` (`<script>[-<variant>]-<host kind>-<YYYY-MM-DD>`, the one naming of
benchmarks/results/), `write_benchmark` (what the scripts in benchmarks/ call) and
`write_results`. This module imports nothing heavy.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import re
import sys
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterable, Sequence

from zoo.bench.works import SYSTEMS, WORKS
from zoo.training.cpu_features import cpu_flags as read_cpu_flags
from zoo.training.cpu_features import speed_flags


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


def cpu_flags() -> list[str]:
    """The CPU's flags that decide its products' speed in each precision (AVX2, AVX-512,
    VNNI, BF16, FP16, AMX; `zoo.training.cpu_features.SPEED_FLAGS`): what names a host
    kind's figures."""
    return speed_flags()


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
    from zoo.training.files.file_store import write_atomically

    return write_atomically(path, lambda temporary: temporary.write_text(
        json.dumps(document, indent=2) + "\n"))


def default_output() -> Path:
    """benchmarks/results/bench-<host kind>-<UTC date>.json (see `result_name`)."""
    return results_path(result_name("bench"))


# `<script>[-<variant>]-<host kind>-<YYYY-MM-DD>.<json|png>`: what `result_name` writes.
RESULT_NAME = re.compile(
    r"^(?P<script>[a-z0-9_]+)(?:-(?P<variant>[a-z0-9.-]+?))?"
    r"-(?P<host>avx512|avx2|cpu-[a-z0-9_]+|gpu-[a-z0-9.-]+)"
    r"-(?P<date>\d{4}-\d{2}-\d{2})\.(?:json|png)$")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def host_kind(cpu_flags: Sequence[str] | None = None,
              gpus: Sequence[str] | None = None) -> str:
    """What a result's name says of the machine that measured it: `gpu-<name>` for the
    first GPU `nvidia-smi` lists (`gpu-2x-...` for several), else the CPU's widest vector
    extension (`avx512`, `avx2`: what the CPU works' speed follows most), else
    `cpu-<architecture>`.

    Args:
        cpu_flags: the CPU's flags; read from /proc/cpuinfo when None.
        gpus: the GPUs' names; `gpu_names()` when None.
    """
    gpus = gpu_names() if gpus is None else list(gpus)
    if gpus:
        return "gpu-" + (f"{len(gpus)}x-" if len(gpus) > 1 else "") + _slug(gpus[0])
    if cpu_flags is None:
        cpu_flags = sorted(read_cpu_flags() or ())
    for flag, kind in (("avx512f", "avx512"), ("avx2", "avx2")):
        if flag in cpu_flags:
            return kind
    return "cpu-" + re.sub(r"[^a-z0-9_]+", "_", (platform.machine() or "unknown").lower())


def result_name(script: str, variant: str | None = None, host: str | None = None,
                day: datetime.date | None = None) -> str:
    """The one name of a benchmark result, without its suffix:
    `<script>[-<variant>]-<host kind>-<YYYY-MM-DD>` (`RESULT_NAME` reads it back).

    Args:
        script: the script's name or its path (`__file__`): its stem is used.
        variant: what else tells its results apart (a backend, a model, a work); any text,
            written lower-case with runs of other characters as one `-`.
        host: `host_kind()` when None.
        day: today's UTC date when None.

    Example:
        result_name("beam_step", "tensorflow", "avx2", datetime.date(2026, 11, 25))
        # 'beam_step-tensorflow-avx2-2026-11-25'
    """
    stem = Path(script).stem
    if not re.fullmatch(r"[a-z0-9_]+", stem):
        raise ValueError(f"a script name is lower-case letters, digits and _; got {stem!r}")
    day = day or datetime.datetime.now(datetime.timezone.utc).date()
    parts = [stem] + ([_slug(variant)] if variant and _slug(variant) else [])
    return "-".join(parts + [host or host_kind(), day.isoformat()])


def write_benchmark(script: str, document: dict, variant: str | None = None,
                    output: str | os.PathLike | None = None, say: Any = print) -> Path:
    """Writes a benchmark script's result as JSON: `document` with `device`, `versions`,
    `date` and `command` (the script's command line) added where it has none, under the
    one name `result_name(script, variant)`.json; says where and returns the path.

    Args:
        script: the script's path (`__file__`) or name.
        document: the result.
        variant: what tells this result apart from the script's others (see
            `result_name`).
        output: where it goes: a folder that exists (the file is named there, as in
            benchmarks/results/: what a trial run passes, a temporary folder), a file
            path, or None for benchmarks/results/.
        say: called with the line saying where it went.

    Example:
        write_benchmark(__file__, {"settings": ..., "results": ...}, variant="jax")
    """
    document = dict(document)
    document.setdefault("device", device())
    document.setdefault("versions", versions())
    document.setdefault("date", datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"))
    document.setdefault("command", " ".join(["python", *sys.argv]))
    name = result_name(script, variant)
    if output is None:
        output = results_path(name)
    elif Path(output).is_dir():
        output = Path(output) / f"{name}.json"
    path = write_results(document, output)
    say(f"wrote {path}")
    return path
