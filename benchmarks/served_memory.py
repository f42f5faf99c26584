"""Peak memory of the largest request each served signature accepts, as the model server
runs it: a fresh process, XLA off, the export in a TF1 session with its warm-up replayed
(`zoo.serving.session.ServedModel`), then one request.

    python benchmarks/served_memory.py prepare --output /tmp/served   # the exports (minutes)
    python benchmarks/served_memory.py measure /tmp/served [--case NAME ...] [--output FOLDER]

`prepare` exports the shipped translator (beam 4) and ViT, all-MiniLM-L6-v2 (where its
weights are installed) and an untrained hybrid ViT with a batch-normalised VGG stem
("vit-cifar-vgg"). `measure` runs each case in its own process and reports the resident
memory after loading (with warm-up), and the peak during the request alone
(`zoo.bench.memory.PeakMemory`: the kernel's high-water mark, reset before the request), in
MB. Writes benchmarks/results/served_memory-HOST-DATE.json (`--output`: a folder or a file).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from zoo.bench.report import write_benchmark

# name: (export folder under the repository, signature, Python expression of the inputs,
# what the request is). The expressions run in the measuring process, where `np`, `text`
# (a real sentence) and `jpeg(height, width)` (encoded image bytes) are defined.
CASES = {
    "translator 64 x 4,096 characters": (
        "translator-multi30k-en-de/1", "serving_default",
        "{'sentences': np.array([(text + ' ') * (4096 // (len(text) + 1)) + 'a' * "
        "(4096 % (len(text) + 1))] * 64, dtype=object)}",
        "64 sentences (the cap) of 4,096 characters (the cut) of real words"),
    "translator ids 64 x 64": (
        "translator-multi30k-en-de/1", "translate_ids",
        "{'source_ids': np.random.default_rng(0).integers(4, 8000, (64, 64)).astype('int32')}",
        "64 rows (the cap) of 64 ids (max_source_length)"),
    "encoder 1,024 x 103,424 bytes": (
        "all-minilm-l6-v2/1", "serving_default",
        "{'sentences': np.array([((text + ' ') * 2000).encode()[:103424]] * 1024, "
        "dtype=object)}",
        "1,024 sentences (the cap) of 103,424 bytes each (the cut), 106 MB"),
    "encoder one 100 MB sentence": (
        "all-minilm-l6-v2/1", "serving_default",
        "{'sentences': np.array([((text + ' ') * 2_000_000).encode()[:100_000_000]], "
        "dtype=object)}",
        "one sentence of 100 MB, cut to 103,424 bytes"),
    "encoder ids 1,024 x 512": (
        "all-minilm-l6-v2/1", "embed_ids",
        "{'token_ids': np.full((1024, 512), 2000, 'int32'), "
        "'padding_mask': np.ones((1024, 512), 'int32')}",
        "1,024 rows (the cap) of 512 ids (the position embeddings)"),
    "vit 1,024 images": (
        "vit-cifar10/1", "serving_default",
        "{'images': np.array([jpeg(32, 32, seed=i) for i in range(1024)], dtype=object)}",
        "1,024 CIFAR-size JPEGs (the cap)"),
    "vit 2 x 40 MP JPEGs": (
        "vit-cifar10/1", "serving_default",
        "{'images': np.array([jpeg(5000, 8000, seed=i) for i in range(2)], dtype=object)}",
        "two 8000 x 5000 JPEGs (MAX_PIXELS each)"),
    "vit pixels 64 MiB": (
        "vit-cifar10/1", "classify_pixels",
        "{'pixels': np.full((1, 2364, 2364, 3), 100, 'float32')}",
        "one 2364 x 2364 float32 image (64 MiB, the request cap)"),
    "vit pixels 1,024 x 32 x 32": (
        "vit-cifar10/1", "classify_pixels",
        "{'pixels': np.full((1024, 32, 32, 3), 100, 'float32')}",
        "1,024 images (the cap) of 32 x 32 floats"),
    "hybrid vit 1,024 images": (
        "vit-cifar-vgg/1", "serving_default",
        "{'images': np.array([jpeg(32, 32, seed=i) for i in range(1024)], dtype=object)}",
        "1,024 CIFAR-size JPEGs (the cap), VGG stem with batch norm"),
}

MEASURE = r"""
import io, json, sys
import numpy as np
from zoo.bench.memory import PeakMemory
from zoo.serving.session import ServedModel, set_xla_compilation

def jpeg(height, width, seed=0):
    from PIL import Image
    rng = np.random.default_rng(seed)
    # Smooth content with some noise: a photo's size, not white noise's.
    y, x = np.mgrid[0:height, 0:width]
    image = (np.stack([x * 255 // max(width, 1), y * 255 // max(height, 1),
                       (x + y) % 256], -1) + rng.integers(0, 24, (height, width, 3)))
    buffer = io.BytesIO()
    Image.fromarray(image.clip(0, 255).astype('uint8')).save(buffer, format='JPEG', quality=90)
    return buffer.getvalue()

folder, signature, expression = json.loads(sys.stdin.read())
text = 'Two young, White males are outside near many bushes.'
set_xla_compilation(False)
model = ServedModel(folder)
inputs = eval(expression)
request_mb = sum(sum(len(v) for v in a.ravel()) if a.dtype == object else a.nbytes
                 for a in inputs.values()) / 2 ** 20
with PeakMemory() as request:
    outputs = model(signature, **inputs)
rows = {key: list(value.shape) for key, value in outputs.items()}
print(json.dumps({'loaded_mb': round(request.before_mb), 'peak_mb': round(request.peak_mb),
                  'request_mb': round(request_mb, 1), 'rows': rows}))
"""


def prepare(output: Path) -> None:
    """Exports the four models measured into the repository `output` (those not there)."""
    import keras

    import zoo
    from zoo.models.vit.model import VisionTransformer

    import numpy as np

    done = {p.parent.parent.name for p in output.glob("*/1/saved_model.pb")}
    if "translator-multi30k-en-de" not in done:
        zoo.export("translator-multi30k-en-de", output, beam_size=4)
    if "vit-cifar10" not in done:
        zoo.export("vit-cifar10", output)
    if "all-minilm-l6-v2" not in done:
        try:
            from zoo.converters.minilm import load_minilm

            zoo.export(load_minilm(), output, name="all-minilm-l6-v2")
        except (ModuleNotFoundError, FileNotFoundError) as error:
            print(f"all-MiniLM-L6-v2 not exported: {error}")
    if "vit-cifar-vgg" not in done:
        keras.utils.set_random_seed(0)
        hybrid = VisionTransformer.from_architecture("vit-cifar-vgg", num_classes=10)
        hybrid(np.zeros((1, 32, 32, 3), "uint8"))
        zoo.export(hybrid, output, name="vit-cifar-vgg")


def measure(repository: Path, names: list[str]) -> list[dict]:
    """Runs each case in a fresh process; one result a case (skipped where its export is
    missing)."""
    import os

    results = []
    for name in names:
        folder, signature, expression, what = CASES[name]
        if not (repository / folder).is_dir():
            print(f"{name}: no export at {repository / folder}; skipped")
            continue
        done = subprocess.run(
            [sys.executable, "-c", MEASURE], input=json.dumps([str(repository / folder),
                                                               signature, expression]),
            capture_output=True, text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                 "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
        if done.returncode != 0:
            raise RuntimeError(f"{name} failed:\n{done.stderr[-3000:]}")
        result = {"case": name, "signature": signature, "request": what,
                  **json.loads(done.stdout.strip().splitlines()[-1])}
        print(json.dumps(result), flush=True)
        results.append(result)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prepared = commands.add_parser("prepare", help="export the models measured")
    prepared.add_argument("--output", type=Path, required=True)
    measured = commands.add_parser("measure", help="measure each case's peak memory")
    measured.add_argument("repository", type=Path)
    measured.add_argument("--case", action="append", choices=sorted(CASES), default=None)
    measured.add_argument("--output", help="a folder, or a file (default benchmarks/results/)")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.output)
        return
    results = measure(args.repository, args.case or list(CASES))
    write_benchmark(__file__, {"results": results}, output=args.output)


if __name__ == "__main__":
    main()
