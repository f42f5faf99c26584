"""The GPT-2 decoding works of `zoo bench` (`gpt2-greedy`, `gpt2-top-p`, and `gpt2-greedy-64`
on a GPU): tokens per second of the zoo's `CausalLM.generate_ids` against Hugging Face's
`GPT2LMHeadModel.generate`, keras-hub's `GPT2CausalLM.generate` and CTranslate2's
`Generator.generate_batch`, all of the zoo architecture's shape with random weights.

Every system gets the same random prompts (ids below the end id, seed 0), exactly
`new_tokens` new tokens per row and, for top-p, the same p, temperature 1 and no top-k. The
end token never ends a row, each system told so its own way: the zoo's model here gives the
end token a logit of -1e9 (`end_never_chosen`), as Hugging Face's `min_new_tokens` sets it to
-inf, and CTranslate2's `min_length` does the same; keras-hub's `stop_token_ids=None` lets
it be drawn but stop nothing (keras-hub has no minimum length). CTranslate2 runs the Hugging
Face model after its own converter, from the folder that model was saved in (with a
vocabulary file of made-up pieces: the converter reads one, and the ids are what matters).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any, Callable

from zoo.bench.gpu import autocast, keras_setup, precision, synchronize, torch_device
from zoo.bench.steps import CACHE, measure
from zoo.bench.works import WORKS, family_work_settings

# A filtered logit, as `zoo.generation.samplers.FILTERED`.
NEVER = -1e9


def architecture(name: str) -> dict:
    """The registered architecture's constructor arguments (`zoo models`), dropout off."""
    import zoo.models.captioner.architectures  # noqa: F401  (each registers its own)
    import zoo.models.causal_lm.architectures  # noqa: F401
    import zoo.models.clip.architectures  # noqa: F401
    from zoo.models.architectures import ARCHITECTURES

    config = dict(ARCHITECTURES[name].config)
    for key in ("dropout", "attention_dropout"):
        if key in config:
            config[key] = 0.0
    return config


def end_never_chosen(model_class: type) -> type:
    """A subclass of a zoo model with a tied head (`CausalLM`, `ImageCaptioner`) whose
    logits of its end token are `NEVER`: Hugging Face's `min_new_tokens` for the whole
    generation, so that every row gets all its new tokens."""

    class EndNeverChosen(model_class):
        def logits(self, hidden: Any) -> Any:
            import numpy as np

            logits = super().logits(hidden)
            never = np.zeros((logits.shape[-1],), "float32")
            never[self.end_id] = NEVER
            return logits + never

    EndNeverChosen.__name__ = f"EndNeverChosen{model_class.__name__}"
    return EndNeverChosen


def prompts(batch: int, tokens: int, vocabulary_size: int) -> Any:
    """`(batch, tokens)` int32 random ids below the end id (the vocabulary's last), seed 0."""
    import numpy as np

    return np.random.default_rng(0).integers(
        0, vocabulary_size - 1, (batch, tokens)).astype("int32")


# ---------------------------------------------------------------------- systems
@functools.lru_cache(maxsize=None)
def zoo_causal_lm(name: str) -> Any:
    """The zoo's `CausalLM` of architecture `name` (random weights, seed 0, no dropout) whose
    end token is never chosen; built once per process (a worker runs one work, the tests
    many: its generation functions, compiled per shape and sampler, are then shared)."""
    import keras

    from zoo.models.causal_lm.backbone import GPT2Backbone
    from zoo.models.causal_lm.causal_lm import CausalLM

    keras.utils.set_random_seed(0)
    model = end_never_chosen(CausalLM)(GPT2Backbone(**architecture(name)))
    model.ensure_built()
    return model


# Each system's function builds its model once and returns `steps(ids)`, the step that
# continues those prompts (one per batch of the work).
def zoo_generation(settings: dict) -> Callable[[Any], Callable[[], Any]]:
    """`CausalLM.generate_ids` of the architecture, compiled once per shape by the model."""
    from zoo.generation.samplers import TopPSampler

    model = zoo_causal_lm(settings["architecture"])
    sampler = "greedy" if settings["sampler"] == "greedy" else TopPSampler(
        p=settings["top_p"], temperature=settings["temperature"])
    new = settings["new_tokens"]

    def steps(ids: Any) -> Callable[[], Any]:
        rows = ids.tolist()

        def step() -> None:
            out = model.generate_ids(rows, max_new_tokens=new, sampler=sampler,
                                     seed=settings.get("seed", 0))
            assert all(len(row) == new for row in out), [len(row) for row in out][:4]

        return step

    return steps


def hf_model(settings: dict) -> Any:
    """A random `GPT2LMHeadModel` (seed 0) of the architecture, no dropout, its end id the
    vocabulary's last (GPT-2's)."""
    import torch

    from zoo.bench.steps import torchvision_or_stub

    torchvision_or_stub(installed_only=True)
    from transformers import GPT2Config, GPT2LMHeadModel

    shape = architecture(settings["architecture"])
    end = shape["vocabulary_size"] - 1
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=shape["vocabulary_size"], n_positions=shape["max_positions"],
        n_embd=shape["hidden_dim"], n_layer=shape["num_layers"], n_head=shape["num_heads"],
        n_inner=shape["intermediate_dim"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        bos_token_id=end, eos_token_id=end)
    return GPT2LMHeadModel(config).eval()


def hf_generation(settings: dict) -> tuple[Callable[[Any], Callable[[], Any]], str, str]:
    """`(steps, device, precision)`: `GPT2LMHeadModel.generate`, exactly `new_tokens` new
    tokens (`min_new_tokens`), under autocast in bfloat16."""
    import torch

    where, name, chosen = torch_device()
    model = hf_model(settings).to(where)
    end = model.config.eos_token_id
    new = settings["new_tokens"]
    options = dict(max_new_tokens=new, min_new_tokens=new, pad_token_id=end)
    if settings["sampler"] == "greedy":
        options.update(do_sample=False)
    else:
        options.update(do_sample=True, top_p=settings["top_p"], top_k=0,
                       temperature=settings["temperature"])

    def steps(ids: Any) -> Callable[[], Any]:
        source = torch.from_numpy(ids.astype("int64")).to(where)

        def step() -> None:
            torch.manual_seed(settings.get("seed", 0))
            with torch.inference_mode(), autocast(where, chosen):
                out = model.generate(source, attention_mask=torch.ones_like(source),
                                     **options)
            synchronize(where)
            assert out.shape[1] == source.shape[1] + new, out.shape

        return step

    return steps, name, chosen


def keras_hub_generation(settings: dict) -> Callable[[Any], Callable[[], Any]]:
    """keras-hub's `GPT2CausalLM` of the architecture built from its backbone (random
    weights, no preprocessor): `generate` over prompts padded to their final length, with
    `stop_token_ids=None`."""
    import keras
    import keras_hub
    import numpy as np

    shape = architecture(settings["architecture"])
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=shape["vocabulary_size"], num_layers=shape["num_layers"],
        num_heads=shape["num_heads"], hidden_dim=shape["hidden_dim"],
        intermediate_dim=shape["intermediate_dim"], dropout=0.0,
        max_sequence_length=shape["max_positions"])
    model = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    sampler = "greedy" if settings["sampler"] == "greedy" else keras_hub.samplers.TopPSampler(
        p=settings["top_p"], seed=settings.get("seed", 0),
        temperature=settings["temperature"])
    model.compile(sampler=sampler)

    def steps(ids: Any) -> Callable[[], Any]:
        batch, width = ids.shape
        total = width + settings["new_tokens"]
        tokens = np.zeros((batch, total), "int32")
        tokens[:, :width] = ids
        mask = np.zeros((batch, total), bool)
        mask[:, :width] = True

        def step() -> None:
            out = model.generate({"token_ids": tokens, "padding_mask": mask},
                                 stop_token_ids=None)
            assert np.asarray(out["padding_mask"]).all(), "a row stopped early"

        return step

    return steps


def ctranslate2_folder(settings: dict) -> Path:
    """CTranslate2's conversion of `hf_model` (both folders kept in the bench's cache)."""
    import ctranslate2

    name = settings["architecture"]
    hf_folder, folder = CACHE / f"{name}-hf", CACHE / f"{name}-ct2"
    if not (folder / "model.bin").exists():
        model = hf_model(settings)
        model.save_pretrained(hf_folder)
        _write_vocabulary(hf_folder, model.config.vocab_size)
        ctranslate2.converters.TransformersConverter(str(hf_folder)).convert(
            str(folder), force=True)
    return folder


def _write_vocabulary(folder: Path, size: int) -> None:
    """A GPT-2 tokenizer of `size` made-up pieces, the end-of-text piece last, and no
    merges: the converter reads its pieces (the bench feeds ids, never text)."""
    from transformers import GPT2Tokenizer

    pieces = [f"piece{i}" for i in range(size - 1)] + ["<|endoftext|>"]
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    GPT2Tokenizer(str(folder / "vocab.json"), str(folder / "merges.txt")).save_pretrained(
        folder)


def ctranslate2_generation(settings: dict) -> tuple[Callable[[Any], Callable[[], Any]], str]:
    """`(steps, precision)`: `Generator.generate_batch` of the converted model, the prompt
    forwarded at once (`include_prompt_in_result=False`), exactly `new_tokens` new tokens
    (`min_length` and `max_length`)."""
    import ctranslate2

    folder = ctranslate2_folder(settings)
    chosen = precision(on_gpu=False)
    generator = ctranslate2.Generator(str(folder), device="cpu", inter_threads=1,
                                      intra_threads=os.cpu_count() or 1,
                                      compute_type="bfloat16" if chosen == "bfloat16"
                                      else "default")
    pieces = json.loads((folder / "vocabulary.json").read_text())
    new = settings["new_tokens"]
    options = dict(max_length=new, min_length=new, include_prompt_in_result=False)
    if settings["sampler"] == "top_p":
        options.update(sampling_topk=0, sampling_topp=settings["top_p"],
                       sampling_temperature=settings["temperature"])

    def steps(ids: Any) -> Callable[[], Any]:
        start = [[pieces[i] for i in row] for row in ids.tolist()]

        def step() -> None:
            out = generator.generate_batch(start, max_batch_size=len(start), **options)
            assert all(len(r.sequences_ids[0]) == new for r in out), [
                len(r.sequences_ids[0]) for r in out][:4]

        return step

    return steps, chosen


# ---------------------------------------------------------------------- one job
def timed_rate(step: Callable[[], Any], items: int, settings: dict, seconds: float,
               dry_run: bool) -> float:
    """`measure` with the work's steps: on a GPU its `warmup` and at least `timed` calls,
    on a CPU `measure`'s own; a dry run one of each."""
    if settings["warmup"] is None:
        return measure(step, items, 0.0 if dry_run else seconds)
    return measure(step, items, 0.0 if dry_run else seconds, warmup=settings["warmup"],
                   min_calls=settings["timed"])


def run(work: str, system: str, seconds: float, dry_run: bool = False) -> list[dict]:
    """One job's results, one per batch (`variant` "batch N"): tokens per second, with the
    device, the precision and the settings it ran."""
    settings = family_work_settings(work, dry_run)
    vocabulary = architecture(settings["architecture"])["vocabulary_size"]
    name = ""
    if system == "hf":
        steps, name, chosen = hf_generation(settings)
    elif system == "ctranslate2":
        steps, chosen = ctranslate2_generation(settings)
    else:
        name, chosen = keras_setup()
        steps = (zoo_generation if system == "zoo" else keras_hub_generation)(settings)
    results = []
    for batch in settings["batches"]:
        step = steps(prompts(batch, settings["prompt_tokens"], vocabulary))
        rate = timed_rate(step, batch * settings["new_tokens"], settings, seconds, dry_run)
        results.append({"variant": f"batch {batch}", "rate": rate, "unit": WORKS[work].unit,
                        "precision": "bfloat16 mixed" if chosen == "bfloat16" else chosen,
                        "settings": settings, **({"device": name} if name else {})})
    return results
