"""The works of `zoo bench`: what each measures, on which systems and backends, at which
settings; the GPU works' shapes (`gpu_work_settings`) and their `--dry-run` size.

`zoo.bench.harness` plans and runs them, `zoo.bench.workers` and `zoo.bench.gpu` measure them.
This module imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from zoo.bench import flops

# The systems, in the table's column order, and the modules each needs.
SYSTEMS: dict[str, tuple[str, ...]] = {
    "zoo": ("keras",),
    "timm": ("torch", "timm"),
    "timm-compiled": ("torch", "timm"),
    "keras-hub": ("keras_hub",),
    "hf": ("torch", "transformers"),
    "ctranslate2": ("ctranslate2", "transformers", "torch", "sentencepiece"),
    # The host's peak (`zoo.bench.peak`): a large matrix product on each backend the works
    # use (the backend's own module is checked before its job is planned).
    "matmul": (),
}
PEAK_SYSTEM = "matmul"
PEAK_BACKENDS = ("tensorflow", "jax", "torch")

_VISION = (("zoo", "tensorflow"), ("zoo", "jax"), ("timm", "torch"),
           ("timm-compiled", "torch"), ("keras-hub", "jax"))
_TRANSLATION = (("zoo", "tensorflow"), ("zoo", "jax"), ("hf", "torch"),
                ("ctranslate2", "ctranslate2"))
# int8 beside float32, in each job (`zoo.bench.workers.int8_and_float`).
_INT8_TRANSLATION = (("zoo", "tensorflow"), ("zoo", "jax"), ("ctranslate2", "ctranslate2"))
_INT8_VISION = (("zoo", "tensorflow"), ("zoo", "jax"))
# The GPU machine has no TensorFlow (../shared/gpu/README.md): the zoo runs on JAX there.
_GPU_VISION = (("zoo", "jax"), ("timm", "torch"), ("timm-compiled", "torch"),
               ("keras-hub", "jax"))
_GPU_MT_TRAIN = (("zoo", "jax"), ("keras-hub", "jax"), ("hf", "torch"))
_GPU_MT_GENERATE = (("zoo", "jax"), ("hf", "torch"))
# timm eager only: a compiled peer would spend a minute of the loan compiling a small model.
_GPU_CIFAR = (("zoo", "jax"), ("timm", "torch"))
# The new model families (`FAMILY_SETTINGS`, `family_work_settings`; measured by
# `zoo.bench.decoding` and `zoo.bench.vision_language`). keras-hub has no captioner.
_TEXT_GENERATION = (("zoo", "tensorflow"), ("zoo", "jax"), ("hf", "torch"),
                    ("keras-hub", "jax"), ("ctranslate2", "ctranslate2"))
_CLIP = (("zoo", "tensorflow"), ("zoo", "jax"), ("hf", "torch"), ("keras-hub", "jax"))
_CAPTIONER = (("zoo", "tensorflow"), ("zoo", "jax"), ("hf", "torch"))
_GPU_GPT2 = (("zoo", "jax"), ("hf", "torch"))
_GPU_CLIP = (("zoo", "jax"), ("hf", "torch"), ("keras-hub", "jax"))
# What every new family's work holds fixed: the end token never ends a row, each system told
# so in its own way.
_NO_EARLY_END = ("the end token never ends a row (the zoo: its logit at -1e9, as Hugging "
                 "Face's min_new_tokens sets it to -inf; CTranslate2: min_length; keras-hub: "
                 "stop_token_ids=None, so the token may be drawn but stops nothing)")


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
    Work("mt-greedy-int8", "mt-greedy with int8 weights (the zoo: Keras' per-channel int8, "
         "zoo.models.quantization; CTranslate2: compute_type int8 on the same converted "
         "model), each job timing its float32 too", "tokens/s", _INT8_TRANSLATION),
    Work("mt-beam4-int8", "mt-beam4 with int8 weights, beside float32 (as mt-greedy-int8)",
         "tokens/s", _INT8_TRANSLATION),
    Work("vit-tiny-infer-int8", "vit-tiny-infer with int8 weights, beside float32",
         "images/s", _INT8_VISION),
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
    # The new families, on the CPU (`family_work_settings`), random weights.
    Work("gpt2-greedy", "GPT-2 small (zoo architecture gpt2-small: 12 x 768, 12 heads, "
         "vocabulary 50,257): the same random prompts of 32 tokens, exactly 32 new tokens "
         "each, greedy, batch 1 and 16; " + _NO_EARLY_END, "tokens/s", _TEXT_GENERATION),
    Work("gpt2-top-p", "gpt2-greedy with top-p sampling: p 0.9, temperature 1, no top-k "
         "(Hugging Face top_k=0, CTranslate2 sampling_topk=0), seed 0", "tokens/s",
         _TEXT_GENERATION),
    Work("clip-b32-images", "CLIP ViT-B/32 (zoo architecture clip-vit-b32): image "
         "embeddings of 32 images of 224 px per call", "images/s", _CLIP),
    Work("clip-b32-texts", "same CLIP: text embeddings of 32 texts per call, each 77 ids "
         "(a start id, 14 random ids, the end id, then end ids as padding)", "texts/s", _CLIP),
    Work("clip-b32-zero-shot", "same CLIP: zero-shot label probabilities of 32 images over "
         "10 label texts, both towers every call (as CLIPModel's forward), softmax on the "
         "host", "images/s", _CLIP),
    Work("captioner-greedy", "image captioner (zoo architecture vit-gpt2-captioner: ViT-B/16 "
         "at 224 px under GPT-2 small with cross-attention): 8 images per call, exactly 16 "
         "caption tokens each, greedy; the end token never ends a caption (the zoo: its "
         "logit at -1e9; Hugging Face: min_new_tokens); keras-hub has no captioner",
         "captions/s", _CAPTIONER),
    # The new families on a GPU (`family_work_settings`; issue 65).
    Work("gpt2-greedy-64", "GPT-2 small: 64 random prompts of 64 tokens, exactly 64 new "
         "tokens each, greedy, the model on the device; the end token never ends a row",
         "tokens/s", _GPU_GPT2),
    Work("clip-b32-embed-256", "CLIP ViT-B/32: image embeddings of 256 images and text "
         "embeddings of 256 texts of 77 ids per call, inputs on the device",
         "embeddings/s", _GPU_CLIP),
    Work("peak", "the host's peak: a square matrix product (4096, on a GPU 8192) in float32 "
         "and bfloat16 on each backend the other works use", "GFLOP/s",
         tuple((PEAK_SYSTEM, backend) for backend in PEAK_BACKENDS)),
)}

# Names that `--work` takes for several works. `cpu`, the default, is every work sized for
# the CPU machines; `gpu` is ANCHORS.md's H100 table (far too large for a CPU but in a dry
# run).
GROUPS: dict[str, tuple[str, ...]] = {
    "cpu": ("vit-tiny-train", "vit-tiny-infer", "vit-b16-infer", "mt-greedy", "mt-beam4",
            "mt-served"),
    "int8": ("mt-greedy-int8", "mt-beam4-int8", "vit-tiny-infer-int8"),
    "gpu": ("vit-b16-train", "vit-b16-infer-512", "mt-base-train", "mt-base-greedy",
            "mt-base-beam4", "vit-cifar-small-train", "gpt2-greedy-64", "clip-b32-embed-256"),
    "text-generation": ("gpt2-greedy", "gpt2-top-p"),
    "vision-language": ("clip-b32-images", "clip-b32-texts", "clip-b32-zero-shot",
                        "captioner-greedy"),
}
# The works of the new families, CPU and GPU: `family_work_settings` gives their settings.
FAMILY_WORKS = GROUPS["text-generation"] + GROUPS["vision-language"] + (
    "gpt2-greedy-64", "clip-b32-embed-256")

# The CPU works' models (random weights; the same shapes for every system).
VIT_TINY = {"image_size": 32, "patch_size": 4, "num_layers": 6, "hidden_dim": 192,
            "num_heads": 3, "intermediate_dim": 384, "num_classes": 10}
MT = {"vocabulary_size": 8000, "hidden_dim": 256, "num_encoder_layers": 3,
      "num_decoder_layers": 3, "num_heads": 8, "intermediate_dim": 1024}

# The settings every worker uses (written into the JSON).
SETTINGS: dict[str, Any] = {
    "vit_train_batch": 128, "vit_infer_batch": 256, "vit_b16_batch": 8,
    "mt_sentences": 32, "mt_source_tokens": 24, "mt_new_tokens": 32,
    "served_model": "translator-multi30k-en-de", "served_beams": [1, 4], "served_batches": [1, 32],
    "weights": "random (mt-served: the shipped translator)", "dropout": 0.0,
    "precision": "float32 (--precision bfloat16: Keras mixed_bfloat16, torch.autocast "
                 "bfloat16 for timm, Hugging Face's model in bfloat16, CTranslate2's "
                 "bfloat16 and int8_bfloat16 compute types)",
}

# The GPU works' models (the CPU works' are in `zoo.bench.workers`).
VIT_B16 = {"image_size": 224, "patch_size": 16, "num_layers": 12, "hidden_dim": 768,
           "num_heads": 12, "intermediate_dim": 3072, "num_classes": 1000}
# zoo/models/vit/architectures.py's "vit-cifar-small" less its dropout
# (tests/zoo/bench/test_bench.py checks).
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


# The new families' works (`FAMILY_WORKS`): the zoo's registered architectures, random
# weights, every peer built to the same shape (`zoo.bench.decoding`,
# `zoo.bench.vision_language`). The GPU works change the sizes given under "gpu".
FAMILY_SETTINGS: dict[str, Any] = {
    "gpt2": {"architecture": "gpt2-small", "prompt_tokens": 32, "new_tokens": 32,
             "batches": [1, 16], "top_p": 0.9, "temperature": 1.0, "seed": 0,
             "gpu": {"prompt_tokens": 64, "new_tokens": 64, "batches": [64]}},
    # Texts of 77 ids: a start id, `text_ids` random ids, the end id, end ids as padding.
    "clip": {"architecture": "clip-vit-b32", "batch": 32, "text_ids": 14, "labels": 10,
             "gpu": {"batch": 256}},
    "captioner": {"architecture": "vit-gpt2-captioner", "batch": 8, "new_tokens": 16},
    # Steps of a GPU work (a CPU work: `measure`'s 2 warm-up calls, then `--seconds`).
    "gpu_steps": {"warmup": 3, "timed": 10},
    # What `--dry-run` makes of them: the tiny architectures, DRY_RUN's batch and tokens.
    "dry_run_architectures": {"gpt2": "gpt2-tiny", "clip": "clip-tiny",
                              "captioner": "captioner-tiny"},
}


def family_work_settings(work: str, dry_run: bool = False) -> dict[str, Any]:
    """What a work of the new families (`FAMILY_WORKS`) runs: `architecture` (a zoo
    architecture name), `batches` (GPT-2: one result per batch) or `batch`, the token counts,
    the sampler's settings (GPT-2), `warmup` and `timed` steps (None on a CPU: `measure`'s
    defaults); with `dry_run`, the tiny architecture at `DRY_RUN`'s batch and tokens.

    Raises:
        ValueError: for a work outside `FAMILY_WORKS`.
    """
    if work not in FAMILY_WORKS:
        raise ValueError(f"{work!r} is no work of the new families; expected one of "
                         f"{', '.join(FAMILY_WORKS)}")
    family = work.split("-")[0]
    base = FAMILY_SETTINGS[family]
    settings = {k: v for k, v in base.items() if k != "gpu"}
    on_gpu = work in GROUPS["gpu"]
    if on_gpu:
        settings.update(base["gpu"], **FAMILY_SETTINGS["gpu_steps"])
    else:
        settings.update(warmup=None, timed=None)
    if family == "gpt2":
        sampling = work == "gpt2-top-p"
        settings["sampler"] = "top_p" if sampling else "greedy"
        if not sampling:
            settings.pop("top_p"), settings.pop("temperature"), settings.pop("seed")
    if family == "clip":
        settings["towers"] = {"clip-b32-images": "images", "clip-b32-texts": "texts",
                              "clip-b32-zero-shot": "zero-shot"}.get(work, "images and texts")
        if settings["towers"] != "zero-shot":
            settings.pop("labels")
    if dry_run:
        tiny = DRY_RUN
        settings["architecture"] = FAMILY_SETTINGS["dry_run_architectures"][family]
        settings.update(warmup=tiny["warmup"], timed=tiny["timed"])
        if "labels" in settings:  # as many as the texts: the same compiled shapes
            settings["labels"] = tiny["batch"]
        for key in ("prompt_tokens", "text_ids"):
            if key in settings:
                settings[key] = tiny["tokens"]
        if "new_tokens" in settings:
            settings["new_tokens"] = tiny["new_tokens"]
        settings["batches" if "batches" in settings else "batch"] = (
            [tiny["batch"]] if "batches" in settings else tiny["batch"])
    return settings


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
    if work in FAMILY_WORKS:
        return family_work_settings(work, dry_run)
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


def flops_per_unit(work: str, dry_run: bool = False) -> float | None:
    """The floating-point operations (matrix products, `zoo.bench.flops`) of one unit of
    `work` (an image, a token, a target token) from its shapes; None for a work whose count
    its shapes do not give (`mt-served`: real sentences of every length; the int8 works;
    `peak`; the new families' works, `FAMILY_WORKS`).

    Example:
        >>> round(flops_per_unit("vit-tiny-train") / 1e9, 3)   # GFLOP per image
        0.752
    """
    if work in FAMILY_WORKS:
        return None
    if work in GROUPS["gpu"]:
        s = gpu_work_settings(work, dry_run)
        model, batch = s["model"], s["batch"]
        if work.startswith("vit"):
            per_image = flops.vit_train_flops if s["train"] else flops.vit_forward_flops
            return float(per_image(model))
        if s["train"]:
            return flops.translation_train_flops(
                model, batch, s["source_tokens"], s["target_tokens"]) / (
                    batch * s["target_tokens"])
        return flops.generation_flops(model, batch, s["source_tokens"], s["new_tokens"],
                                      s["beam"]) / (batch * s["new_tokens"])
    if work == "vit-tiny-train":
        return float(flops.vit_train_flops(VIT_TINY))
    if work in ("vit-tiny-infer", "vit-b16-infer"):
        return float(flops.vit_forward_flops(VIT_TINY if work == "vit-tiny-infer"
                                             else VIT_B16))
    if work in ("mt-greedy", "mt-beam4"):
        sentences, new = SETTINGS["mt_sentences"], SETTINGS["mt_new_tokens"]
        return flops.generation_flops(
            MT, sentences, SETTINGS["mt_source_tokens"], new,
            beam=4 if work == "mt-beam4" else 1) / (sentences * new)
    return None
