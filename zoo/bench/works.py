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
            "mt-base-beam4", "vit-cifar-small-train"),
}

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


def flops_per_unit(work: str, dry_run: bool = False) -> float | None:
    """The floating-point operations (matrix products, `zoo.bench.flops`) of one unit of
    `work` (an image, a token, a target token) from its shapes; None for a work whose count
    its shapes do not give (`mt-served`: real sentences of every length; the int8 works;
    `peak`).

    Example:
        >>> round(flops_per_unit("vit-tiny-train") / 1e9, 3)   # GFLOP per image
        0.752
    """
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
