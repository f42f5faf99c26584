"""Start-up time of each `zoo` verb, against `python -c "import tensorflow"` in the same run.

    python benchmarks/startup_time.py [--repeats 3]

Every command runs in a fresh process (`python -m zoo.cli ...`, as the console script does),
the median wall time of `--repeats` runs is kept, and the ratio to the median of `python -c
"import tensorflow"` is reported: below 1 means the verb answers before TensorFlow could
even be imported. Commands that need a model do one small real job (one sentence, one
CIFAR-10 JPEG from ../shared/data), so their time is start-up plus loading plus that job.
Also records, per command, its exit status and how many lines it wrote on stderr (none for
a success; an error is one line, an argument error argparse's usage and message). Each run
is timed by the harness (`zoo.bench.steps.seconds_per_call`); writes
benchmarks/results/startup_time-HOST-DATE.json (`zoo.bench.report.result_name`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from zoo.bench.report import write_benchmark
from zoo.bench.steps import seconds_per_call

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("ZOO_SHARED_DATA", REPO.parent / "shared" / "data"))


def commands(images: Path | None) -> dict[str, list[str]]:
    """The measured command lines (without the interpreter), by label. `images` is a folder
    of one-image class folders from CIFAR-10, or None when the data is absent."""
    zoo = ["-m", "zoo.cli"]
    found = {"zoo --help": [*zoo, "--help"], "zoo models": [*zoo, "models"]}
    for verb in ("translate", "classify", "evaluate", "export", "convert"):
        found[f"zoo {verb} --help"] = [*zoo, verb, "--help"]
    found["zoo train vit --help"] = [*zoo, "train", "vit", "--help"]
    found["zoo finetune translator --help"] = [*zoo, "finetune", "translator", "--help"]
    found["zoo evaluate nonsense (argument error)"] = [*zoo, "evaluate", "nonsense"]
    found["zoo translate --model typo x (error)"] = [*zoo, "translate", "--model", "typo", "x"]
    found["zoo translate TEXT (beam 1)"] = [*zoo, "translate", "--beam-size", "1",
                                            "A man is riding a bicycle."]
    if images is not None:
        first = next(images.glob("*/*.jpg"))
        found["zoo classify IMAGE"] = [*zoo, "classify", str(first)]
        found["zoo evaluate vit (10 images)"] = [*zoo, "evaluate", "vit", "--model",
                                                 "vit-cifar10", "--data", str(images)]
    return found


def time_command(argv: list[str], repeats: int) -> tuple[float, int, int]:
    """(median seconds, exit status, lines on stderr) of `python argv` over `repeats` runs."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "ZOO_LOG")}
    runs: list[subprocess.CompletedProcess] = []

    def run() -> None:
        runs.append(subprocess.run([sys.executable, *argv], cwd=REPO, env=env,
                                   capture_output=True, text=True))

    times = [seconds_per_call(run) for _ in range(repeats)]
    lines = max(len(done.stderr.splitlines()) for done in runs)
    return statistics.median(times), runs[-1].returncode, lines


def main() -> None:
    """Times every command and writes the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per command (median)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        images = None
        archive = DATA / "cifar10" / "cifar10-train-jpg.tar.gz"
        if archive.is_file():
            images = Path(folder)
            with tarfile.open(archive) as tar:
                for member in tar:
                    parts = member.name.split("/")
                    if member.name.endswith(".jpg") and not (images / parts[-2]).exists():
                        (images / parts[-2]).mkdir()
                        (images / parts[-2] / parts[-1]).write_bytes(
                            tar.extractfile(member).read())
        load_before = os.getloadavg()
        before, _, _ = time_command(["-c", "import tensorflow"], args.repeats)
        rows = []
        for label, argv in commands(images).items():
            seconds, status, lines = time_command(argv, args.repeats)
            rows.append({"command": label, "seconds": round(seconds, 3),
                         "exit_status": status, "stderr_lines": lines})
            print(f"{label:40s} {seconds:7.2f} s  exit {status}  stderr lines {lines}")
        # The baseline is timed before and after the commands: the machine's load may drift.
        after, _, _ = time_command(["-c", "import tensorflow"], args.repeats)
    baseline = (before + after) / 2
    for row in rows:
        row["ratio_to_import_tensorflow"] = round(row["seconds"] / baseline, 3)
    print(f"python -c \"import tensorflow\": {before:.2f} s before, {after:.2f} s after")
    for row in rows:
        print(f"{row['command']:40s} {row['seconds']:7.2f} s  "
              f"{row['ratio_to_import_tensorflow']:5.2f}x")
    result = {
        "baseline": "python -c \"import tensorflow\"",
        "baseline_seconds": round(baseline, 3),
        "repeats": args.repeats,
        "baseline_seconds_before_and_after": [round(before, 3), round(after, 3)],
        "load_average_at_start": [round(x, 2) for x in load_before],
        "commands": rows,
    }
    write_benchmark(__file__, result)


if __name__ == "__main__":
    main()
