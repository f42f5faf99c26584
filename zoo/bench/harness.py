"""`zoo bench`: the zoo against timm, keras-hub, Hugging Face and CTranslate2, in one run.

    zoo bench [--work NAME ...] [--rounds N] [--seconds S] [--output FILE.json] [--dry-run]

Every (system, work) runs in a process of its own (one Keras backend per process:
`zoo.bench.workers`; the GPU works' in `zoo.bench.gpu`), and the whole list is repeated
`--rounds` times, interleaved, so that
noise from other jobs on the machine hits every system alike; each one's best round is kept.
The table gives every rate and its ratio to the zoo's fastest backend on the same work; the
JSON holds the device, the versions, the settings and the results. A peer that is not
installed (`pip install attention-zoo[bench]`) is skipped with a line saying so.

Two groups of works: `--work cpu` (the default) sized for the 2-core CPU machines, and
`--work gpu`, ANCHORS.md's "Measured on a lent H100" table (`GPU_SETTINGS`): on a GPU in
bfloat16 mixed precision, on a CPU in float32. `--dry-run` shrinks the GPU works to
`DRY_RUN` (2 layers, width 64, batch 4, 1 warm-up and 1 timed step) so that the whole GPU
command can be tried on a CPU before a loan; the CPU works keep their shapes and run one
warm-up and one timed call.

This module imports nothing heavy: the workers do, each in its own process.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

# The systems, in the table's column order, and the modules each needs.
SYSTEMS: dict[str, tuple[str, ...]] = {
    "zoo": ("keras",),
    "timm": ("torch", "timm"),
    "timm-compiled": ("torch", "timm"),
    "keras-hub": ("keras_hub",),
    "hf": ("torch", "transformers"),
    "ctranslate2": ("ctranslate2", "transformers", "torch", "sentencepiece"),
}

_VISION = (("zoo", "tensorflow"), ("zoo", "jax"), ("timm", "torch"),
           ("timm-compiled", "torch"), ("keras-hub", "jax"))
_TRANSLATION = (("zoo", "tensorflow"), ("zoo", "jax"), ("hf", "torch"),
                ("ctranslate2", "ctranslate2"))
# The GPU machine has no TensorFlow (../shared/gpu/README.md): the zoo runs on JAX there.
_GPU_VISION = (("zoo", "jax"), ("timm", "torch"), ("timm-compiled", "torch"),
               ("keras-hub", "jax"))
_GPU_MT_TRAIN = (("zoo", "jax"), ("keras-hub", "jax"), ("hf", "torch"))
_GPU_MT_GENERATE = (("zoo", "jax"), ("hf", "torch"))
# timm eager only: a compiled peer would spend a minute of the loan compiling a small model.
_GPU_CIFAR = (("zoo", "jax"), ("timm", "torch"))


@dataclasses.dataclass(frozen=True)
class Work:
    """One piece of work: what it measures, its unit, and the (system, backend) pairs."""

    name: str
    description: str
    unit: str
    runs: tuple[tuple[str, str], ...]


WORKS: dict[str, Work] = {w.name: w for w in (
    Work("vit-tiny-train", "ViT 32 px / patch 4, 6 x 192, 3 heads, MLP 384, 10 classes: "
         "AdamW train step, batch 128", "images/s", _VISION),
    Work("vit-tiny-infer", "same ViT, inference, batch 256", "images/s", _VISION),
    Work("vit-b16-infer", "ViT-B/16, 224 px, inference, batch 8", "images/s", _VISION),
    Work("mt-greedy", "Transformer 3+3, d 256, 8 heads, FFN 1024, vocabulary 8,000: 32 "
         "sentences x 24 source tokens, 32 new tokens each, greedy", "tokens/s", _TRANSLATION),
    Work("mt-beam4", "same Transformer and sentences, beam 4", "tokens/s", _TRANSLATION),
    Work("mt-served", "translator-multi30k-en-de, strings in and out, beam 1 and 4, the first "
         "32 Multi30k test_2016_flickr sentences: the export's serving_default as TF Serving "
         "runs it (a TF1 session, XLA off) and the Python API, batch 1 and 32", "sentences/s",
         (("zoo", "tensorflow"),)),
    # The GPU works (`GPU_SETTINGS`, `gpu_work_settings`).
    Work("vit-b16-train", "ViT-B/16, 224 px, 1000 classes: AdamW train step, batch 256, "
         "inputs on the device, bf16 mixed precision on a GPU", "images/s", _GPU_VISION),
    Work("vit-b16-infer-512", "same ViT-B/16, inference, batch 512", "images/s", _GPU_VISION),
    Work("mt-base-train", "Transformer-base (6+6 layers, d 512, 8 heads, FFN 2048, vocabulary "
         "32,000): AdamW train step, batch 128 x 64 source + 64 target tokens",
         "target tokens/s", _GPU_MT_TRAIN),
    Work("mt-base-greedy", "same Transformer-base: 64 sentences x 64 source tokens, 64 new "
         "tokens each (end token suppressed), greedy", "tokens/s", _GPU_MT_GENERATE),
    Work("mt-base-beam4", "same Transformer-base and sentences, beam 4", "tokens/s",
         _GPU_MT_GENERATE),
    Work("vit-cifar-small-train", "vit-cifar-small (32 px / patch 4, 7 x 384, 8 heads, MLP "
         "384, 10 classes): AdamW train step, batch 512", "images/s", _GPU_CIFAR),
)}

# Names that `--work` takes for several works. `cpu`, the default, is every work sized for
# the CPU machines; `gpu` is ANCHORS.md's H100 table (far too large for a CPU but in a dry
# run).
GROUPS: dict[str, tuple[str, ...]] = {
    "cpu": ("vit-tiny-train", "vit-tiny-infer", "vit-b16-infer", "mt-greedy", "mt-beam4",
            "mt-served"),
    "gpu": ("vit-b16-train", "vit-b16-infer-512", "mt-base-train", "mt-base-greedy",
            "mt-base-beam4", "vit-cifar-small-train"),
}

# The settings every worker uses (written into the JSON).
SETTINGS: dict[str, Any] = {
    "vit_train_batch": 128, "vit_infer_batch": 256, "vit_b16_batch": 8,
    "mt_sentences": 32, "mt_source_tokens": 24, "mt_new_tokens": 32,
    "served_model": "translator-multi30k-en-de", "served_beams": [1, 4], "served_batches": [1, 32],
    "weights": "random (mt-served: the shipped translator)", "dropout": 0.0,
    "precision": "float32",
}

# The GPU works' models (the CPU works' are in `zoo.bench.workers`).
VIT_B16 = {"image_size": 224, "patch_size": 16, "num_layers": 12, "hidden_dim": 768,
           "num_heads": 12, "intermediate_dim": 3072, "num_classes": 1000}
# zoo/models/vit/architectures.py's "vit-cifar-small" less its dropout (tests/zoo/test_bench.py checks).
VIT_CIFAR_SMALL = {"image_size": 32, "patch_size": 4, "num_layers": 7, "hidden_dim": 384,
                   "num_heads": 8, "intermediate_dim": 384, "num_classes": 10}
MT_BASE = {"vocabulary_size": 32000, "hidden_dim": 512, "num_encoder_layers": 6,
           "num_decoder_layers": 6, "num_heads": 8, "intermediate_dim": 2048}

# The GPU works' settings: those of ANCHORS.md's "Measured on a lent H100" table, so that
# the figures there are comparable (written into the JSON when a GPU work runs).
GPU_SETTINGS: dict[str, Any] = {
    "vit_b16_train_batch": 256, "vit_b16_infer_batch": 512, "vit_cifar_small_batch": 512,
    "mt_base_batch": 128, "mt_base_source_tokens": 64, "mt_base_target_tokens": 64,
    "mt_base_sentences": 64, "mt_base_new_tokens": 64,
    "vision_steps": {"warmup": 10, "timed": 30},
    "translation_steps": {"warmup": 5, "timed": 20},
    "learning_rate": {"vision": 1e-3, "translation": 1e-4},
    "inputs": "synthetic, put on the device once before the warm-up",
    "gpu_precision": "bfloat16 mixed precision: Keras mixed_bfloat16, torch.autocast "
                     "bfloat16 (float32 weights and optimizer state everywhere)",
    "cpu_precision": "float32",
}

# What `--dry-run` makes of every GPU work: the same code at a size a CPU runs in seconds.
DRY_RUN: dict[str, Any] = {
    "num_layers": 2, "hidden_dim": 64, "num_heads": 2, "intermediate_dim": 128,
    "image_size": 32, "patch_size": 8, "num_classes": 10, "vocabulary_size": 512,
    "batch": 4, "tokens": 8, "new_tokens": 4, "warmup": 1, "timed": 1,
}

RESULT_PREFIX = "BENCH_RESULT "


@dataclasses.dataclass(frozen=True)
class Job:
    """One (work, system, backend): one worker process per round."""

    work: str
    system: str
    backend: str

    @property
    def label(self) -> str:
        return f"{self.system} ({self.backend}) {self.work}"


def gpu_work_settings(work: str, dry_run: bool = False) -> dict[str, Any]:
    """What a GPU work runs: `model` (the constructor's shape arguments), `batch`, `train`,
    `learning_rate` (AdamW's), the `warmup` and `timed` step counts and, for the translation
    works, `source_tokens` with `target_tokens` (training) or `new_tokens` and `beam`
    (generation); with `dry_run`, the same at `DRY_RUN`'s size.

    Raises:
        ValueError: for a work outside `GROUPS["gpu"]`.
    """
    if work not in GROUPS["gpu"]:
        raise ValueError(f"{work!r} is no GPU work; expected one of {', '.join(GROUPS['gpu'])}")
    g = GPU_SETTINGS
    if work.startswith("vit"):
        model = dict(VIT_CIFAR_SMALL if work == "vit-cifar-small-train" else VIT_B16)
        batch = {"vit-b16-train": g["vit_b16_train_batch"],
                 "vit-b16-infer-512": g["vit_b16_infer_batch"]}.get(
                     work, g["vit_cifar_small_batch"])
        settings = dict(model=model, batch=batch, train=work.endswith("-train"),
                        **g["vision_steps"])
        if settings["train"]:
            settings["learning_rate"] = g["learning_rate"]["vision"]
    else:
        model = dict(MT_BASE)
        settings = dict(model=model, **g["translation_steps"])
        if work == "mt-base-train":
            settings.update(batch=g["mt_base_batch"], train=True,
                            learning_rate=g["learning_rate"]["translation"],
                            source_tokens=g["mt_base_source_tokens"],
                            target_tokens=g["mt_base_target_tokens"])
        else:
            settings.update(batch=g["mt_base_sentences"], train=False,
                            source_tokens=g["mt_base_source_tokens"],
                            new_tokens=g["mt_base_new_tokens"],
                            beam=4 if work == "mt-base-beam4" else 1)
    if dry_run:
        tiny = DRY_RUN
        for key in model:
            if key in tiny:
                model[key] = tiny[key]
            elif key.startswith("num_") and key.endswith("_layers"):
                model[key] = tiny["num_layers"]
        for key in ("source_tokens", "target_tokens"):
            if key in settings:
                settings[key] = tiny["tokens"]
        if "new_tokens" in settings:
            settings["new_tokens"] = tiny["new_tokens"]
        settings.update(batch=tiny["batch"], warmup=tiny["warmup"], timed=tiny["timed"])
    return settings


def expand_works(names: Sequence[str]) -> list[str]:
    """`names` with every group (`GROUPS`) replaced by its works, each work once, in order."""
    works: list[str] = []
    for name in names:
        for work in GROUPS.get(name, (name,)):
            if work not in works:
                works.append(work)
    return works


def missing_modules(system: str) -> list[str]:
    """The modules `system` needs that this environment lacks (imports none of them)."""
    return [m for m in SYSTEMS[system] if importlib.util.find_spec(m) is None]


def plan(works: Sequence[str], available: Callable[[str], list[str]] = missing_modules,
         say: Callable[[str], None] = print) -> list[Job]:
    """The jobs of `works` (groups expanded), less those whose system is missing (each skip
    said once)."""
    jobs, said = [], set()
    for name in expand_works(works):
        if name not in WORKS:
            raise ValueError(f"unknown work {name!r}; expected one of {', '.join(WORKS)}")
        for system, backend in WORKS[name].runs:
            missing = available(system)
            if missing:
                if system not in said:
                    say(f"skipped {system}: {', '.join(missing)} not installed "
                        "(pip install 'attention-zoo[bench]')")
                    said.add(system)
                continue
            jobs.append(Job(name, system, backend))
    return jobs


def run_worker(job: Job, seconds: float, timeout: float = 900.0,
               dry_run: bool = False) -> list[dict]:
    """Runs one job in a fresh process (`--dry-run` passed on); its results (a list of dicts
    with `rate`, `unit` and perhaps `variant`, `device`, `precision`, `settings`), or one dict
    with `error` or `skipped`."""
    env = dict(os.environ, KERAS_BACKEND=job.backend if job.backend in (
        "tensorflow", "jax", "torch") else "tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, "-m", "zoo.bench.workers", job.work, job.system, job.backend,
               "--seconds", str(seconds)] + (["--dry-run"] if dry_run else [])
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env=env)
    except subprocess.TimeoutExpired:
        return [{"error": f"no result within {timeout:.0f} s"}]
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return [{"error": f"exit status {done.returncode}: {tail}"}]
    return json.loads(lines[-1][len(RESULT_PREFIX):])


def run_rounds(jobs: Sequence[Job], rounds: int,
               runner: Callable[[Job], list[dict]],
               say: Callable[[str], None] = print,
               after_round: Callable[[int, list[dict]], None] | None = None,
               after_job: Callable[[int, list[dict]], None] | None = None) -> list[dict]:
    """Runs every job once per round, the rounds interleaved (job 1, 2, ..., 1, 2, ...), and
    keeps each (job, variant)'s best rate. `after_round(rounds_done, results)` is called
    after each round and `after_job(rounds_done, results)` after each job (the bench writes
    its JSON then: a run cut short keeps what it measured, which on a GPU lent for minutes
    may be one round or less).

    Returns:
        One dict per (job, variant): `work`, `system`, `backend`, `rate` (the best round),
        `unit`, `rounds` (every round's rate, in order), `wall_s` (every round's seconds in
        the worker, start-up and compilation included), and `variant`, `detail`, `device`,
        `precision` and `settings` where the worker gave them; `error` or `skipped` instead
        of a rate where no round gave one.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1; got {rounds!r}")
    best: dict[tuple, dict] = {}
    for round_index in range(rounds):
        for job in jobs:
            started = time.perf_counter()
            job_results = runner(job)
            wall = round(time.perf_counter() - started, 1)
            for result in job_results:
                key = (job.work, job.system, job.backend, result.get("variant"))
                entry = best.setdefault(key, {"work": job.work, "system": job.system,
                                              "backend": job.backend, "rate": None,
                                              "unit": WORKS[job.work].unit, "rounds": [],
                                              "wall_s": []})
                if result.get("variant") is not None:
                    entry["variant"] = result["variant"]
                rate = result.get("rate")
                entry["rounds"].append(rate)
                entry["wall_s"].append(wall)
                if rate is None:
                    reason = result.get("error") or result.get("skipped") or "no rate"
                    entry.setdefault("skipped" if "skipped" in result else "error", reason)
                    if round_index == 0:
                        say(f"{'skipped' if 'skipped' in result else 'failed'} {job.label}: "
                            f"{reason}")
                    continue
                for key_name in ("unit", "detail", "device", "precision", "settings"):
                    if key_name in result:
                        entry[key_name] = result[key_name]
                if entry["rate"] is None or rate > entry["rate"]:
                    entry["rate"] = rate
            if after_job is not None:
                after_job(round_index, _final(best.values()))
        say(f"round {round_index + 1}/{rounds} done")
        if after_round is not None:
            after_round(round_index + 1, _final(best.values()))
    return _final(best.values())


def _final(entries: Iterable[dict]) -> list[dict]:
    """Copies of the entries; one that has a rate keeps no error of a failed round, and a
    job whose variants gave rates loses the entry of its failed rounds."""
    entries = list(entries)
    measured = {(e["work"], e["system"], e["backend"]) for e in entries
                if e["rate"] is not None}
    results = []
    for entry in entries:
        if (entry["rate"] is None and "variant" not in entry
                and (entry["work"], entry["system"], entry["backend"]) in measured):
            continue
        entry = dict(entry, rounds=list(entry["rounds"]),
                     wall_s=list(entry.get("wall_s", [])))
        if entry["rate"] is not None:
            entry.pop("error", None)
            entry.pop("skipped", None)
        results.append(entry)
    return results


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
    """Writes `document` as indented JSON to `path` (its folder created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def default_output() -> Path:
    """benchmarks/results/bench-<UTC date>.json (see `results_path`)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    return results_path(f"bench-{stamp}")


def bench(works: Sequence[str], rounds: int = 3, seconds: float = 3.0,
          output: str | os.PathLike | None = None,
          runner: Callable[[Job], list[dict]] | None = None,
          available: Callable[[str], list[str]] = missing_modules,
          say: Callable[[str], None] = print, dry_run: bool = False) -> dict:
    """Plans, runs and reports a benchmark; writes and returns the JSON document.

    Args:
        works: names from `WORKS` or `GROUPS`.
        rounds: how many times the whole list runs (interleaved); the best round is kept.
        seconds: timed seconds per job and round, after warm-up (a GPU work times at least
            `GPU_SETTINGS`' step counts; a dry run one step).
        output: the JSON file; `default_output()` when None.
        runner: runs one job (a fresh process by default; tests pass a fake).
        available: the modules a system lacks (tests pass a fake).
        say: where progress lines go.
        dry_run: the GPU works at `DRY_RUN`'s size, every job one warm-up and one timed step
            (a check that the command runs, not a measurement).
    """
    command_works = list(works)
    works = expand_works(works)
    jobs = plan(works, available, say)
    runner = runner or (lambda job: run_worker(job, seconds, dry_run=dry_run))
    path = Path(output) if output is not None else default_output()
    settings = dict(SETTINGS, rounds=rounds, seconds=seconds, works=list(works),
                    command="zoo bench " + " ".join(f"--work {w}" for w in command_works)
                    + f" --rounds {rounds} --seconds {seconds:g}"
                    + (" --dry-run" if dry_run else ""),
                    date=datetime.datetime.now(datetime.timezone.utc).isoformat(
                        timespec="seconds"), dry_run=dry_run)
    gpu_works = [w for w in works if w in GROUPS["gpu"]]
    if gpu_works:
        # Each result's `settings` and `precision` say what its worker ran; these are the
        # intended ones.
        settings["gpu"] = dict(GPU_SETTINGS, works={
            w: gpu_work_settings(w, dry_run) for w in gpu_works})
        if dry_run:
            settings["gpu"]["dry_run"] = DRY_RUN
        elif not gpu_names():
            say(f"no GPU found (nvidia-smi): {', '.join(gpu_works)} will run at full size in "
                "float32 on the CPU, for a long time; --dry-run tries them small")
    document: dict = {}

    def write(rounds_done: int, results: list[dict]) -> None:
        document.clear()
        document.update({"device": device(), "versions": versions(),
                         "settings": dict(settings, rounds_done=rounds_done),
                         "results": results})
        write_results(document, path)

    results = run_rounds(jobs, rounds, runner, say, after_round=write, after_job=write)
    if not jobs:
        write(rounds, results)
    say(format_table(results))
    say(f"wrote {path}")
    return document


def add_arguments(parser: Any) -> None:
    """The flags of `zoo bench` (zoo/cli/parser.py registers the subcommand)."""
    parser.add_argument("--work", action="append", choices=list(WORKS) + list(GROUPS),
                        metavar="NAME",
                        help="work to measure, repeatable: " + ", ".join(WORKS)
                             + "; or a group: cpu (the default: "
                             + ", ".join(GROUPS["cpu"]) + "), gpu (ANCHORS.md's H100 "
                             "works, bf16 on a GPU: " + ", ".join(GROUPS["gpu"]) + ")")
    parser.add_argument("--rounds", type=int, default=3,
                        help="times the whole list runs, interleaved; the best round is kept")
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="timed seconds per system, work and round, after warm-up")
    parser.add_argument("--output", default=None, metavar="FILE.json",
                        help="where the JSON goes (default: benchmarks/results/"
                             "bench-DATE.json)")
    parser.add_argument("--dry-run", action="store_true",
                        help="check that every job runs: the GPU works at a tiny size "
                             "(2 layers, width 64, batch 4), one warm-up and one timed step "
                             "each; the rates mean nothing")


def main(args: Any) -> None:
    """`zoo bench` with parsed arguments."""
    from zoo.errors import UserError

    if args.rounds < 1:
        raise UserError(f"--rounds must be at least 1; got {args.rounds}")
    bench(args.work or ["cpu"], rounds=args.rounds, seconds=args.seconds,
          output=args.output, dry_run=args.dry_run)
