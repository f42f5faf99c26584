"""Peak memory of the largest request each served signature accepts, as the model server
runs it: a fresh process, XLA off, the export in a TF1 session with its warm-up replayed
(`zoo.serving.session.ServedModel`), then one request.

    python benchmarks/served_memory.py prepare --output /tmp/served [--model NAME ...]
    python benchmarks/served_memory.py measure /tmp/served [--case NAME ...] [--output FOLDER]

`prepare` exports the shipped translator (beam 4) and ViT, all-MiniLM-L6-v2 (where its
weights are installed), an untrained hybrid ViT with a batch-normalised VGG stem
("vit-cifar-vgg") and an untrained GPT-2 small ("gpt2-small", 124M weights, 1,024 positions)
with a made-up byte-level vocabulary of GPT-2's 50,257 pieces (memory depends on the shapes,
not on the weights or the pieces). `measure` runs each case in its own process and reports
the resident memory after loading (with warm-up: the idle server), and the peak during the
request alone (`zoo.bench.memory.PeakMemory`: the kernel's high-water mark, reset before the
request), in MB. Writes benchmarks/results/served_memory-HOST-DATE.json (`--output`: a folder
or a file).

The language model's largest request is `MAX_PROMPTS` prompts of `prompt_token_cap` tokens
each (" a" is one token) and `new_token_cap` new tokens: with the start token, every row's
key/value cache spans all 1,024 positions (`zoo.serving.generation_endpoints`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from zoo.bench.report import write_benchmark
from zoo.serving.generation_endpoints import MAX_PROMPTS, new_token_cap, prompt_token_cap

# GPT-2 small's positions, and the caps of its export (the prompt's text, the new tokens).
GPT2_POSITIONS = 1024
PROMPT_TOKENS = prompt_token_cap(GPT2_POSITIONS, add_start_token=True)
NEW_TOKENS = new_token_cap(GPT2_POSITIONS)

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
    "gpt2-small at the caps": (
        "gpt2-small/1", "serving_default",
        f"{{'prompts': np.array([b' a' * {PROMPT_TOKENS}] * {MAX_PROMPTS}, dtype=object), "
        f"'max_new_tokens': np.int32({NEW_TOKENS})}}",
        f"{MAX_PROMPTS} prompts (the cap) of {PROMPT_TOKENS} tokens (the cap; "
        f"{PROMPT_TOKENS + 1} with the start token) and {NEW_TOKENS} new tokens (the cap), "
        "greedy"),
    "gpt2-small one short prompt": (
        "gpt2-small/1", "serving_default",
        "{'prompts': np.array([b'Once upon a time'], dtype=object)}",
        "one prompt of 16 bytes, the default 32 new tokens, greedy"),
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
# Small integer outputs (a language model's `new_tokens`): what the request made.
counts = {key: value.tolist() for key, value in outputs.items()
          if value.dtype.kind in 'iu' and value.size <= 64}
print(json.dumps({'loaded_mb': round(request.before_mb), 'peak_mb': round(request.peak_mb),
                  'request_mb': round(request_mb, 1), 'rows': rows, 'counts': counts}))
"""


# The exports the cases read, by folder name.
MODELS = ("translator-multi30k-en-de", "vit-cifar10", "all-minilm-l6-v2", "vit-cifar-vgg",
          "gpt2-small")


def prepare(output: Path, names: list[str]) -> None:
    """Exports the models `names` into the repository `output` (those not there)."""
    import keras

    import zoo
    from zoo.models.vit.model import VisionTransformer

    import numpy as np

    done = {p.parent.parent.name for p in output.glob("*/1/saved_model.pb")}
    names = [name for name in names if name not in done]
    if "translator-multi30k-en-de" in names:
        zoo.export("translator-multi30k-en-de", output, beam_size=4)
    if "vit-cifar10" in names:
        zoo.export("vit-cifar10", output)
    if "all-minilm-l6-v2" in names:
        try:
            from zoo.converters.minilm import load_minilm

            zoo.export(load_minilm(), output, name="all-minilm-l6-v2")
        except (ModuleNotFoundError, FileNotFoundError) as error:
            print(f"all-MiniLM-L6-v2 not exported: {error}")
    if "vit-cifar-vgg" in names:
        keras.utils.set_random_seed(0)
        hybrid = VisionTransformer.from_architecture("vit-cifar-vgg", num_classes=10)
        hybrid(np.zeros((1, 32, 32, 3), "uint8"))
        zoo.export(hybrid, output, name="vit-cifar-vgg")
    if "gpt2-small" in names:
        zoo.export(gpt2_small(), output, name="gpt2-small")


def gpt2_small() -> "zoo.CausalLM":
    """An untrained GPT-2 small (dropout off) with a made-up byte-level BPE vocabulary of
    GPT-2's size: the 256 byte characters, 50,000 pieces of two of them (" a" among the
    first: `Ġa`), and `<|endoftext|>`."""
    import keras

    from zoo.models.causal_lm.causal_lm import CausalLM
    from zoo.models.causal_lm.preprocessor import CausalLMPreprocessor
    from zoo.text.byte_pair import END_OF_TEXT, BytePairTokenizer, byte_to_unicode

    characters = sorted(set(byte_to_unicode().values()))
    space = byte_to_unicode()[ord(" ")]
    pairs = [(space, "a")] + [(a, b) for a in characters for b in characters
                              if (a, b) != (space, "a")]
    pairs = pairs[:50_000]
    vocabulary = {piece: i for i, piece in enumerate(characters + [a + b for a, b in pairs])}
    vocabulary[END_OF_TEXT] = len(vocabulary)
    tokenizer = BytePairTokenizer(vocabulary, [f"{a} {b}" for a, b in pairs])
    keras.utils.set_random_seed(0)
    lm = CausalLM.from_architecture("gpt2-small", dropout=0.0, attention_dropout=0.0)
    lm.preprocessor = CausalLMPreprocessor(tokenizer, GPT2_POSITIONS)
    lm.ensure_built()
    return lm


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
    prepared.add_argument("--model", action="append", choices=MODELS, default=None,
                          help="export only this one (repeatable; default: all)")
    measured = commands.add_parser("measure", help="measure each case's peak memory")
    measured.add_argument("repository", type=Path)
    measured.add_argument("--case", action="append", choices=sorted(CASES), default=None)
    measured.add_argument("--output", help="a folder, or a file (default benchmarks/results/)")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.output, args.model or list(MODELS))
        return
    results = measure(args.repository, args.case or list(CASES))
    write_benchmark(__file__, {"results": results}, output=args.output)


if __name__ == "__main__":
    main()
