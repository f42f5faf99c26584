"""The processes of `zoo bench`: one (work, system, backend) each, one result line out.

    python -m zoo.bench.workers WORK SYSTEM BACKEND [--seconds S] [--dry-run]

Each worker builds its model with random weights (the same shapes for every system; see
`zoo.bench.works.WORKS`), warms it up, then repeats the work for `--seconds` and prints
`BENCH_RESULT [{"rate": ..., "unit": ...}, ...]` (the rate over the timed calls). Set
`KERAS_BACKEND` before starting one: `zoo.bench.harness` does. The GPU works
(`zoo.bench.works.GROUPS`) are in `zoo.bench.gpu`, the host's peak (the `peak` work) in
`zoo.bench.peak`, the new families' (GPT-2, CLIP, the captioner) in `zoo.bench.decoding` and
`zoo.bench.vision_language`. `ZOO_BENCH_PRECISION=bfloat16` (`zoo bench --precision
bfloat16`) runs every system's products in bfloat16: Keras' `mixed_bfloat16` (the zoo,
keras-hub), timm under `torch.autocast("cpu", dtype=torch.bfloat16)`, Hugging Face's model
converted to bfloat16, CTranslate2's `bfloat16` compute type (and `int8_bfloat16` in the int8 works).
`--dry-run` makes every `measure` one warm-up and one timed call (and the GPU works tiny).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from zoo.bench import steps
from zoo.bench.gpu import precision as chosen_precision
from zoo.bench.harness import RESULT_PREFIX
from zoo.bench.steps import (CACHE, keras_vit_model, measure, random_marian_model,
                             timm_vit_model, torchvision_or_stub)
from zoo.bench.works import FAMILY_WORKS, GROUPS, MT, SETTINGS, VIT_B16, VIT_TINY, WORKS
from zoo.runtime import use_onednn
DATA = Path(os.environ.get("ZOO_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared"
                           / "data"))


def bfloat16() -> bool:
    """Whether this worker runs its products in bfloat16 (`ZOO_BENCH_PRECISION`)."""
    return chosen_precision(on_gpu=False) == "bfloat16"


def set_keras_policy() -> None:
    """Keras' global dtype policy for what is built next: `mixed_bfloat16` or float32."""
    import keras

    keras.mixed_precision.set_global_policy("mixed_bfloat16" if bfloat16() else "float32")


def _vit_shape(work: str) -> tuple[dict, int]:
    shape = VIT_B16 if work == "vit-b16-infer" else VIT_TINY
    batch = {"vit-tiny-train": SETTINGS["vit_train_batch"],
             "vit-tiny-infer": SETTINGS["vit_infer_batch"]}.get(work, SETTINGS["vit_b16_batch"])
    return shape, batch


# ---------------------------------------------------------------------- vision
def keras_vit_step(work: str, system: str, int8: bool = False
                   ) -> tuple[Callable[[], Any], int]:
    """`(step, batch)`: one `train_on_batch` / `predict_on_batch` (Keras's compiled steps) of
    `keras_vit_model` (with `int8`, the zoo's quantized first), and the images it takes."""
    import keras
    import numpy as np

    shape, batch = _vit_shape(work)
    set_keras_policy()
    model, images = keras_vit_model(system, shape, batch)
    if int8:
        from zoo.models.quantization import quantize_model

        model(images[:1])
        quantize_model(model)
    labels = np.random.default_rng(1).integers(0, shape["num_classes"], batch)
    if work == "vit-tiny-train":
        model.compile(optimizer=keras.optimizers.AdamW(1e-3),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return lambda: model.train_on_batch(images, labels), batch
    return lambda: np.asarray(model.predict_on_batch(images)), batch


def vit_step_parser(description: str) -> argparse.ArgumentParser:
    """The flags of the benchmark scripts that time `keras_vit_step` (benchmarks/fusion_ab.py,
    benchmarks/product_bound.py): `--work`, `--precision` (set `ZOO_BENCH_PRECISION` from it
    before building the step), `--rounds` and `--output`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--work", choices=("vit-tiny-train", "vit-tiny-infer"),
                        default="vit-tiny-train")
    parser.add_argument("--precision", choices=("float32", "bfloat16"), default="bfloat16")
    parser.add_argument("--rounds", type=int, choices=range(1, 101), default=6,
                        metavar="1..100", help="alternating rounds of the A/B (default: 6)")
    parser.add_argument("--output", type=Path, help="the result's file or folder")
    return parser


def keras_vit(work: str, system: str, seconds: float, int8: bool = False) -> float:
    """Images per second of `keras_vit_step`."""
    step, batch = keras_vit_step(work, system, int8)
    return measure(step, batch, seconds)


def int8_and_float(work: str, system: str, seconds: float) -> list[dict]:
    """An int8 work's job: the float32 and the int8 rate of `work` less its "-int8", in one
    process, each a variant (in bfloat16: "bfloat16" and "int8_bfloat16", CTranslate2's
    names, the zoo's int8 weights under `mixed_bfloat16`)."""
    base = work.removesuffix("-int8")
    results = []
    for variant in (("bfloat16", "int8_bfloat16") if bfloat16() else ("float32", "int8")):
        int8 = variant.startswith("int8")
        if base.startswith("vit"):
            rate = keras_vit(base, system, seconds, int8=int8)
        elif system == "zoo":
            rate = zoo_translation(base, seconds, int8=int8)
        else:
            rate = ctranslate2_translation(base, seconds, compute_type=variant)
        results.append({"variant": variant, "rate": rate})
    return results


def timm_vit(work: str, system: str, seconds: float) -> tuple[float, str]:
    """timm's VisionTransformer (eager, or under `torch.compile`), AdamW for training."""
    import torch

    shape, batch = _vit_shape(work)
    model, note = timm_vit_model(shape)
    images = torch.randn(batch, 3, shape["image_size"], shape["image_size"])
    labels = torch.randint(0, shape["num_classes"], (batch,))
    if system == "timm-compiled":
        model = torch.compile(model)
    # bfloat16 products, float32 weights and optimizer state: PyTorch's mixed precision.
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=bfloat16())
    if work == "vit-tiny-train":
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step() -> None:
            optimizer.zero_grad(set_to_none=True)
            with autocast:
                loss = torch.nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            loss.item()

        return measure(step, batch, seconds), note
    model.eval()

    def infer() -> None:
        with torch.inference_mode(), autocast:
            model(images).sum().item()

    return measure(infer, batch, seconds), note


# ---------------------------------------------------------------------- translation
def _mt_beam(work: str) -> int:
    return 4 if work.startswith("mt-beam4") else 1


def random_source(rng: Any, end_id: int, low: int = 4) -> Any:
    """`(sentences, source_tokens)` random ids from `low` up, the last one `end_id`."""
    import numpy as np

    ids = rng.integers(low, MT["vocabulary_size"] - 1,
                       (SETTINGS["mt_sentences"], SETTINGS["mt_source_tokens"]))
    ids[:, -1] = end_id
    return ids.astype(np.int64)


def zoo_translation(work: str, seconds: float, int8: bool = False) -> float:
    """The zoo's Translator with random weights; `Translator.search` (compiled). The end token
    is suppressed so that every sentence gets all its new tokens, as HF's
    `min_new_tokens` and CTranslate2's `min_decoding_length` do. With `int8`, quantized
    first (`zoo.models.quantization.quantize_model`)."""
    import keras
    import numpy as np

    from zoo.training.text_batches import END_ID
    from zoo.models.translator.model import Translator

    keras.utils.set_random_seed(0)
    set_keras_policy()
    model = Translator(dropout=0.0, suppressed_token_ids=[END_ID], **MT)
    model.ensure_built()
    if int8:
        from zoo.models.quantization import quantize_model

        quantize_model(model)
    source = random_source(np.random.default_rng(0), END_ID).astype("int32")
    new = SETTINGS["mt_new_tokens"]
    beam = _mt_beam(work)

    def step() -> None:
        tokens, _ = model.search(source, beam_size=beam, max_length=new)
        assert tokens.shape[-1] == new and not (tokens == END_ID).any()

    return measure(step, source.shape[0] * new, seconds)


def _sentencepiece_files(folder: Path) -> tuple[Path, Path, Path]:
    """Marian's tokenizer files (source.spm, target.spm, vocab.json) for a vocabulary of
    `MT["vocabulary_size"]`, trained on Multi30k's English and German once and cached."""
    import sentencepiece

    folder.mkdir(parents=True, exist_ok=True)
    model, vocab = folder / "spm.model", folder / "vocab.json"
    if not model.exists():
        text = folder / "train.txt"
        with text.open("w") as out:
            for language in ("en", "de"):
                with gzip.open(DATA / "multi30k" / f"train.{language}.gz", "rt") as f:
                    out.writelines(f)
        # </s> and <unk> come first and <pad> last in Marian's vocabulary: the pieces fill
        # the rest.
        sentencepiece.SentencePieceTrainer.train(
            input=str(text), model_prefix=str(folder / "spm"),
            vocab_size=MT["vocabulary_size"] - 1, unk_id=1, eos_id=0, bos_id=-1, pad_id=-1,
            model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
            minloglevel=2)
        processor = sentencepiece.SentencePieceProcessor(model_file=str(model))
        pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
        pieces = ["</s>", "<unk>"] + [p for p in pieces if p not in ("</s>", "<unk>")]
        pieces = pieces[:MT["vocabulary_size"] - 1] + ["<pad>"]
        vocab.write_text(json.dumps({p: i for i, p in enumerate(pieces)}))
    return model, model, vocab


def marian(folder: Path) -> tuple[Any, Any]:
    """A random-weight `MarianMTModel` of the bench's shape and its tokenizer, saved in
    `folder` (CTranslate2's converter reads it from there)."""
    torchvision_or_stub()
    from transformers import MarianTokenizer

    source, target, vocab = _sentencepiece_files(CACHE / "marian-spm")
    tokenizer = MarianTokenizer(str(source), str(target), str(vocab))
    model = random_marian_model(MT, len(tokenizer), pad_id=tokenizer.pad_token_id,
                                end_id=tokenizer.eos_token_id, max_positions=128).eval()
    if not (folder / "config.json").exists():
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return model, tokenizer


def hf_translation(work: str, seconds: float) -> float:
    """Hugging Face `MarianMTModel.generate`, exactly `mt_new_tokens` new tokens each."""
    import numpy as np
    import torch

    model, tokenizer = marian(CACHE / "marian-hf")
    if bfloat16():
        model = model.to(torch.bfloat16)
    source = torch.from_numpy(random_source(
        np.random.default_rng(0), tokenizer.eos_token_id, low=2))
    new = SETTINGS["mt_new_tokens"]

    def step() -> None:
        with torch.inference_mode():
            out = model.generate(source, attention_mask=torch.ones_like(source),
                                 num_beams=_mt_beam(work), do_sample=False,
                                 max_new_tokens=new, min_new_tokens=new)
        assert out.shape[1] == new + 1  # the decoder's start token, then the new ones

    return measure(step, source.shape[0] * new, seconds)


def ctranslate2_translation(work: str, seconds: float, compute_type: str = "default"
                            ) -> float:
    """CTranslate2 running the same Marian model after its `TransformersConverter`, its
    weights in `compute_type` ("int8", "int8_bfloat16": quantized as it loads; "default":
    "bfloat16" in a bfloat16 run)."""
    import ctranslate2
    import numpy as np

    folder = CACHE / "marian-ct2"
    hf_folder = CACHE / "marian-hf"
    _, tokenizer = marian(hf_folder)
    if not (folder / "model.bin").exists():
        ctranslate2.converters.TransformersConverter(str(hf_folder)).convert(
            str(folder), force=True)
    if compute_type == "default" and bfloat16():
        compute_type = "bfloat16"
    translator = ctranslate2.Translator(str(folder), device="cpu", inter_threads=1,
                                        intra_threads=os.cpu_count() or 1,
                                        compute_type=compute_type)
    ids = random_source(np.random.default_rng(0), tokenizer.eos_token_id, low=2)
    source = [tokenizer.convert_ids_to_tokens(row.tolist()) for row in ids]
    new = SETTINGS["mt_new_tokens"]

    def step() -> None:
        out = translator.translate_batch(
            source, beam_size=_mt_beam(work), max_decoding_length=new,
            min_decoding_length=new, max_batch_size=len(source))
        assert all(len(r.hypotheses[0]) == new for r in out), [
            len(r.hypotheses[0]) for r in out][:4]

    return measure(step, len(source) * new, seconds)


# ---------------------------------------------------------------------- serving
def served_translation(seconds: float) -> list[dict]:
    """The shipped translator exported (beam 1 and 4) and run as TF Serving runs it (a TF1
    session, XLA compilation off: `zoo.serving.session`), against the Python API
    (`Translator.translate`, XLA on), on the same sentences at batch 1 and 32."""
    from zoo.hub.loader import load
    from zoo.serving.export import export_model
    from zoo.serving.session import ServedModel, set_xla_compilation

    name = SETTINGS["served_model"]
    with gzip.open(DATA / "multi30k" / "test_2016_flickr.en.gz", "rt") as f:
        sentences = [next(f).strip() for _ in range(max(SETTINGS["served_batches"]))]
    # One export per version of the code it runs (the layers included), kept across rounds.
    package = Path(__file__).parents[1]
    sources = [package / "serving" / "export.py", package / "serving" / "model_server.py"]
    sources += sorted((package / "generation").glob("*.py"))
    sources += [package / "models" / "translator" / "model.py"]
    sources += sorted((package.parent / "layers").glob("*.py"))
    code = hashlib.sha256(b"".join(f.read_bytes() for f in sources)).hexdigest()[:12]
    model = load(name)
    results = []
    for beam in SETTINGS["served_beams"]:
        version = CACHE / f"served-{code}" / f"beam{beam}" / "1"
        if not version.exists():
            export_model(name, version.parent.parent, version=1, name=f"beam{beam}",
                         beam_size=beam, force=True)
        set_xla_compilation(False)
        served_model = ServedModel(version)
        for batch in SETTINGS["served_batches"]:
            chunks = [sentences[i:i + batch] for i in range(0, len(sentences), batch)]

            def served(chunks: list = chunks) -> None:
                for chunk in chunks:
                    served_model(sentences=chunk)

            set_xla_compilation(False)
            rate = measure(served, len(sentences), seconds, warmup=1, min_calls=2)
            results.append({"variant": f"served (XLA off), beam {beam}, batch {batch}",
                            "rate": rate})
            set_xla_compilation(True)
            rate = measure(lambda: model.translate(sentences, beam_size=beam, batch_size=batch),
                           len(sentences), seconds, warmup=1, min_calls=2)
            results.append({"variant": f"Python API, beam {beam}, batch {batch}",
                            "rate": rate})
    return results


def run(work: str, system: str, seconds: float, dry_run: bool = False,
        backend: str = "tensorflow") -> list[dict]:
    """One job's results: `[{"rate": ..., "unit": ..., ...}]`."""
    unit = WORKS[work].unit
    if work == "peak":
        from zoo.bench.peak import measure_peak

        return measure_peak(backend, seconds, dry_run)
    if work in FAMILY_WORKS:  # GPT-2, CLIP and the captioner, on a CPU or a GPU
        from zoo.bench import decoding, vision_language

        family = decoding if work.startswith("gpt2") else vision_language
        return family.run(work, system, seconds, dry_run)
    if work in GROUPS["gpu"]:
        from zoo.bench import gpu

        return gpu.run(work, system, seconds, dry_run)
    if work == "mt-served":
        return [dict(r, unit=unit) for r in served_translation(seconds)]
    precision = "bfloat16" if bfloat16() else "float32"
    if work in GROUPS["int8"]:
        return [dict(r, unit=unit, precision=precision)
                for r in int8_and_float(work, system, seconds)]
    detail = ""
    if work.startswith("vit"):
        if system.startswith("timm"):
            rate, detail = timm_vit(work, system, seconds)
        else:
            rate = keras_vit(work, system, seconds)
    elif system == "zoo":
        rate = zoo_translation(work, seconds)
    elif system == "hf":
        rate = hf_translation(work, seconds)
    else:
        rate = ctranslate2_translation(work, seconds)
    result = {"rate": rate, "unit": unit, "precision": precision}
    if detail:
        result["detail"] = detail
    return [result]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", choices=list(WORKS))
    parser.add_argument("system")
    parser.add_argument("backend")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--dry-run", action="store_true",
                        help="one warm-up and one timed call; the GPU works tiny")
    args = parser.parse_args(argv)
    use_onednn()  # the zoo's TensorFlow as the `zoo` command runs it
    steps.DRY_RUN = args.dry_run
    results = run(args.work, args.system, args.seconds, args.dry_run, args.backend)
    print(RESULT_PREFIX + json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
