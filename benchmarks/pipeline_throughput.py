"""Sentences/s and images/s of `zoo translate|classify --pipeline` (Apache Beam's DirectRunner,
1 and 2 workers) against `zoo translate` / `zoo classify` on the same input.

    python benchmarks/pipeline_throughput.py --sentences 200 --images 1000 [--output FOLDER]

Each figure is one run of the whole command, start-up included (loading TensorFlow and the
model, and for the pipeline starting Beam's workers): what a user waits for. The shipped
models are exported once into --work (greedy search for the translator, so that both routes
run the same search: the command with `--beam-size 1`). Needs ../shared/data (Multi30k's
test set, the CIFAR-10 JPEGs: `zoo.bench.real_inputs`) and Apache Beam. Each command is
timed by the harness (`zoo.bench.steps.seconds_per_call`); writes
benchmarks/results/pipeline_throughput-HOST-DATE.json (`--output`: a folder or a file).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from zoo.bench.real_inputs import cifar10_jpegs, multi30k_sentences
from zoo.bench.report import write_benchmark
from zoo.bench.steps import seconds_per_call


def timed(argv: list[str], stdin: Path | None = None) -> float:
    """Seconds the `zoo` command `argv` takes; fails on a non-zero status."""
    def run() -> None:
        with open(stdin or os.devnull, "rb") as source:
            done = subprocess.run([sys.executable, "-m", "zoo.cli", *argv], stdin=source,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode:
            raise RuntimeError(f"{argv[:3]} failed: {done.stderr.decode()[-2000:]}")

    return seconds_per_call(run)


def exported(work: Path, name: str, **settings) -> Path:
    """The shipped model `name` exported under `work` (once)."""
    from zoo.serving.export import export_model

    folder = work / "exports" / name / "1"
    if not folder.exists():
        export_model(name, work / "exports", **settings)
    return folder


def inputs(work: Path, sentences: int, images: int) -> tuple[Path, Path, list[str]]:
    """The first Multi30k test sentences in a file, and the first CIFAR-10 JPEGs in a
    folder (with their paths)."""
    source = work / "source.en"
    source.write_text("".join(line + "\n" for line in multi30k_sentences(sentences)))
    folder = work / "images"
    folder.mkdir(exist_ok=True)
    for earlier in folder.glob("*.jpg"):  # the pipeline reads the whole folder
        earlier.unlink()
    paths = []
    for number, image in enumerate(cifar10_jpegs(images)):
        target = folder / f"image-{number:05d}.jpg"
        target.write_bytes(image)
        paths.append(str(target))
    return source, folder, paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--work", default="/tmp/zoo-pipeline-bench")
    parser.add_argument("--output", help="a folder, or a file (default benchmarks/results/)")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    translator = exported(work, "translator-multi30k-en-de", beam_size=1)
    vit = exported(work, "vit-cifar10", top_k=3)
    source, folder, paths = inputs(work, args.sentences, args.images)
    runs = {"zoo translate --beam-size 1": timed(
        ["translate", "--beam-size", "1"], stdin=source)}
    for workers in (1, 2):
        runs[f"zoo translate --pipeline --workers {workers}"] = timed(
            ["translate", "--pipeline", str(source), "--output", str(work / "out.de"),
             "--model", str(translator), "--workers", str(workers)])
    runs["zoo classify"] = timed(["classify", "--top-k", "3", *paths])
    for workers in (1, 2):
        runs[f"zoo classify --pipeline --workers {workers}"] = timed(
            ["classify", "--pipeline", str(folder), "--output", str(work / "labels.tsv"),
             "--model", str(vit), "--workers", str(workers), "--top-k", "3"])
    results = []
    for command, seconds in runs.items():
        count = args.sentences if "translate" in command else args.images
        unit = "sentences/s" if "translate" in command else "images/s"
        results.append({"command": command, "elements": count, "seconds": round(seconds, 1),
                        unit: round(count / seconds, 2)})
        print(f"{command:45s} {count:6d} in {seconds:7.1f} s: {count / seconds:8.2f} {unit}")
    write_benchmark(__file__, {"settings": {"sentences": args.sentences,
                                            "images": args.images},
                               "runs": results}, output=args.output)


if __name__ == "__main__":
    main()
