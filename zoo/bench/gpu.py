"""The GPU works of `zoo bench` (`--work gpu`): ANCHORS.md's "Measured on a lent H100" table.

    python -m zoo.bench.workers vit-b16-train zoo jax [--seconds S] [--dry-run]

One job per process, as the CPU works (`zoo.bench.workers` hands these works here). Where a
GPU is present (JAX: `jax.devices()[0].platform == "gpu"`; torch: `torch.cuda.is_available()`)
the model and its synthetic inputs are put on it before the warm-up and run in bfloat16
mixed precision: Keras' `mixed_bfloat16` policy, `torch.autocast(dtype=torch.bfloat16)`;
weights and optimizer state stay float32 in both. Every step ends with its result on the host
(Keras' `train_on_batch` / `predict_on_batch` and `Translator.search` return numpy) or with
`.item()` / `torch.cuda.synchronize()`, so that the clock reads finished work. On a CPU the
same code runs in float32; `ZOO_BENCH_PRECISION=bfloat16` (or `float32`) overrides the choice,
to try the bf16 path on a CPU before a loan.

Each result records the device, the precision and the settings
(`zoo.bench.works.gpu_work_settings`) that its worker actually ran.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from zoo.bench.report import device
from zoo.bench.steps import CACHE, keras_vit_model, measure, random_marian_model, timm_vit_model
from zoo.bench.works import WORKS, gpu_work_settings

PRECISIONS = ("float32", "bfloat16")


def precision(on_gpu: bool) -> str:
    """"bfloat16" (mixed) on a GPU, "float32" on a CPU, unless `ZOO_BENCH_PRECISION` says.

    Raises:
        ValueError: for a `ZOO_BENCH_PRECISION` other than "float32" or "bfloat16".
    """
    chosen = os.environ.get("ZOO_BENCH_PRECISION", "")
    if chosen and chosen not in PRECISIONS:
        raise ValueError(f"ZOO_BENCH_PRECISION must be one of {PRECISIONS}; got {chosen!r}")
    return chosen or ("bfloat16" if on_gpu else "float32")


# ---------------------------------------------------------------------- devices
def keras_device() -> tuple[str, str]:
    """`(device name, precision)` for a Keras model on JAX: sets the global dtype policy
    (before any model is built) and, on a GPU, JAX's compilation cache (the second round's
    process then loads the first one's programs instead of compiling them again: minutes of
    a loan)."""
    import keras

    if keras.backend.backend() != "jax":
        raise ValueError("the GPU works run Keras on JAX (KERAS_BACKEND=jax); got "
                         f"{keras.backend.backend()!r}")
    import jax

    first = jax.devices()[0]
    on_gpu = first.platform == "gpu"
    if on_gpu:
        jax.config.update("jax_compilation_cache_dir",
                          os.environ.get("JAX_COMPILATION_CACHE_DIR",
                                         str(CACHE / "jax-cache")))
    chosen = precision(on_gpu)
    keras.mixed_precision.set_global_policy(
        "mixed_bfloat16" if chosen == "bfloat16" else "float32")
    return (first.device_kind if on_gpu else device()), chosen


def keras_setup() -> tuple[str, str]:
    """`(device name, precision)` for a Keras model on any backend: `keras_device` on JAX;
    elsewhere (TensorFlow, the CPU works) the global dtype policy alone."""
    import keras

    if keras.backend.backend() == "jax":
        return keras_device()
    chosen = precision(False)
    keras.mixed_precision.set_global_policy(
        "mixed_bfloat16" if chosen == "bfloat16" else "float32")
    return device(), chosen


def on_device(array: Any) -> Any:
    """`array` copied once to JAX's default device (a GPU where there is one); Keras passes
    such arrays to its compiled steps without copying them again."""
    import jax

    return jax.device_put(array)


def torch_device() -> tuple[Any, str, str]:
    """`(torch.device, device name, precision)`: the GPU where torch sees one."""
    import torch

    if torch.cuda.is_available():
        gpu = torch.device("cuda")
        return gpu, torch.cuda.get_device_name(gpu), precision(True)
    return torch.device("cpu"), device(), precision(False)


def autocast(where: Any, chosen: str) -> Any:
    """`torch.autocast` in bfloat16 on `where`, or a context that changes nothing."""
    import torch

    return torch.autocast(device_type=where.type, dtype=torch.bfloat16,
                          enabled=chosen == "bfloat16")


def synchronize(where: Any) -> None:
    """Waits for the GPU's queued work (nothing to wait for on a CPU)."""
    import torch

    if where.type == "cuda":
        torch.cuda.synchronize(where)


# ---------------------------------------------------------------------- vision
def keras_vision(system: str, settings: dict) -> tuple[Callable[[], Any], str, str]:
    """`(step, device, precision)`: `train_on_batch` or `predict_on_batch` of the zoo's
    VisionTransformer or keras-hub's ViTBackbone + Dense head, inputs on the device."""
    import keras
    import numpy as np

    name, chosen = keras_device()
    shape, batch = settings["model"], settings["batch"]
    model, images = keras_vit_model(system, shape, batch)
    images = on_device(images)
    labels = on_device(np.random.default_rng(1).integers(
        0, shape["num_classes"], batch).astype("int32"))
    if settings["train"]:
        model.compile(optimizer=keras.optimizers.AdamW(settings["learning_rate"]),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return lambda: model.train_on_batch(images, labels), name, chosen
    return lambda: model.predict_on_batch(images), name, chosen


def timm_vision(system: str, settings: dict, dry_run: bool = False
                ) -> tuple[Callable[[], Any], str, str, str]:
    """`(step, device, precision, note)`: timm's VisionTransformer (eager or under
    `torch.compile`), AdamW for training, under autocast on a GPU. A dry run on a CPU
    compiles with the "aot_eager" backend: the graph capture and autograd of the real run,
    without inductor's C++ build (a minute or more on 2 cores)."""
    import torch

    where, name, chosen = torch_device()
    shape, batch = settings["model"], settings["batch"]
    model, note = timm_vit_model(shape)
    model = model.to(where)
    size = shape["image_size"]
    images = torch.randn(batch, 3, size, size, device=where)
    labels = torch.randint(0, shape["num_classes"], (batch,), device=where)
    if system == "timm-compiled":
        backend = "aot_eager" if dry_run and where.type == "cpu" else "inductor"
        model = torch.compile(model, backend=backend)
        note = "; ".join(filter(None, [note, f"torch.compile backend {backend}"]))
    if settings["train"]:
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=settings["learning_rate"])

        def step() -> None:
            optimizer.zero_grad(set_to_none=True)
            with autocast(where, chosen):
                loss = torch.nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            loss.item()

        return step, name, chosen, note
    model.eval()

    def infer() -> None:
        with torch.inference_mode(), autocast(where, chosen):
            model(images).sum().item()

    return infer, name, chosen, note


# ---------------------------------------------------------------------- translation
def _token_ids(rng: Any, rows: int, columns: int, vocabulary: int) -> Any:
    """Random int32 ids in [4, vocabulary - 1): no padding, start, end or unknown id of the
    zoo's (0-3) nor Marian's (end 0, unknown 1, padding the last)."""
    return rng.integers(4, vocabulary - 1, (rows, columns)).astype("int32")


def _longest(settings: dict) -> int:
    """The position table's length for a translation work: 128, or more where its sequences
    are longer."""
    return max(128, settings["source_tokens"], settings.get("target_tokens", 0),
               settings.get("new_tokens", 0) + 1)


def keras_translation_model(system: str, settings: dict) -> Any:
    """The zoo's Translator, or keras-hub's TokenAndPositionEmbedding + TransformerEncoder x N
    and TokenAndPositionEmbedding + TransformerDecoder x N with a Dense output (its logits
    in float32, as the zoo's), under the global dtype policy and with no dropout."""
    import keras

    shape = settings["model"]
    keras.utils.set_random_seed(0)
    if system == "zoo":
        from zoo.training.text_batches import END_ID
        from zoo.models.translator.model import Translator

        # The end token suppressed: every sentence gets all its new tokens (HF's
        # `min_new_tokens`).
        longest = _longest(settings)
        model = Translator(dropout=0.0, suppressed_token_ids=[END_ID],
                           max_source_length=longest, max_target_length=longest, **shape)
        model.ensure_built()
        return model
    import keras_hub

    vocabulary, width = shape["vocabulary_size"], shape["hidden_dim"]
    layer_args = dict(intermediate_dim=shape["intermediate_dim"], num_heads=shape["num_heads"])
    source = keras.Input((settings["source_tokens"],), dtype="int32", name="source_ids")
    target = keras.Input((settings["target_tokens"],), dtype="int32", name="target_ids")
    x = keras_hub.layers.TokenAndPositionEmbedding(
        vocabulary, settings["source_tokens"], width)(source)
    for _ in range(shape["num_encoder_layers"]):
        x = keras_hub.layers.TransformerEncoder(**layer_args)(x)
    y = keras_hub.layers.TokenAndPositionEmbedding(
        vocabulary, settings["target_tokens"], width)(target)
    for _ in range(shape["num_decoder_layers"]):
        y = keras_hub.layers.TransformerDecoder(**layer_args)(y, x)
    logits = keras.layers.Dense(vocabulary)(y)
    logits = keras.layers.Activation("linear", dtype="float32")(logits)
    return keras.Model({"source_ids": source, "target_ids": target}, logits)


def keras_translation(system: str, settings: dict) -> tuple[Callable[[], Any], str, str]:
    """`(step, device, precision)`: a train step (`train_on_batch`, inputs on the device) of
    `keras_translation_model`, or the zoo's compiled `Translator.search`."""
    import keras
    import numpy as np

    name, chosen = keras_device()
    model = keras_translation_model(system, settings)
    vocabulary = settings["model"]["vocabulary_size"]
    rng = np.random.default_rng(0)
    batch, source_tokens = settings["batch"], settings["source_tokens"]
    if settings["train"]:
        target = _token_ids(rng, batch, settings["target_tokens"] + 1, vocabulary)
        inputs = {"source_ids": on_device(_token_ids(rng, batch, source_tokens, vocabulary)),
                  "target_ids": on_device(target[:, :-1])}
        labels = on_device(target[:, 1:])
        model.compile(optimizer=keras.optimizers.AdamW(settings["learning_rate"]),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return lambda: model.train_on_batch(inputs, labels), name, chosen
    from zoo.training.text_batches import END_ID

    source = _token_ids(rng, batch, source_tokens, vocabulary)
    source[:, -1] = END_ID
    new, beam = settings["new_tokens"], settings["beam"]

    def search() -> None:
        # `search` takes numpy (it compiles once per shape); the ids are 16 KiB.
        tokens, _ = model.search(source, beam_size=beam, max_length=new)
        assert tokens.shape[-1] == new and not (tokens == END_ID).any()

    return search, name, chosen


def hf_translation(settings: dict) -> tuple[Callable[[], Any], str, str]:
    """`(step, device, precision)`: a `MarianMTModel` train step (AdamW, cross-entropy in
    float32), or `generate` with exactly `new_tokens` new tokens; under autocast on a GPU."""
    import numpy as np
    import torch

    where, name, chosen = torch_device()
    vocabulary = settings["model"]["vocabulary_size"]
    pad = vocabulary - 1  # Marian's padding id is its last, its end id 0
    model = random_marian_model(settings["model"], vocabulary, pad_id=pad, end_id=0,
                                max_positions=_longest(settings)).to(where)
    rng = np.random.default_rng(0)
    batch, source_tokens = settings["batch"], settings["source_tokens"]
    source = torch.from_numpy(
        _token_ids(rng, batch, source_tokens, vocabulary).astype(np.int64)).to(where)
    mask = torch.ones_like(source)
    if settings["train"]:
        target = torch.from_numpy(_token_ids(
            rng, batch, settings["target_tokens"] + 1, vocabulary).astype(np.int64)).to(where)
        decoder_inputs, labels = target[:, :-1], target[:, 1:]
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=settings["learning_rate"])

        def step() -> None:
            optimizer.zero_grad(set_to_none=True)
            with autocast(where, chosen):
                logits = model(input_ids=source, attention_mask=mask,
                               decoder_input_ids=decoder_inputs).logits
            loss = torch.nn.functional.cross_entropy(
                logits.float().reshape(-1, vocabulary), labels.reshape(-1))
            loss.backward()
            optimizer.step()
            loss.item()

        return step, name, chosen
    model.eval()
    source[:, -1] = 0  # Marian's end id closes every source
    new = settings["new_tokens"]

    def generate() -> None:
        with torch.inference_mode(), autocast(where, chosen):
            out = model.generate(source, attention_mask=mask, num_beams=settings["beam"],
                                 do_sample=False, max_new_tokens=new, min_new_tokens=new)
        synchronize(where)
        assert out.shape[1] == new + 1  # the decoder's start token, then the new ones

    return generate, name, chosen


# ---------------------------------------------------------------------- one job
def run(work: str, system: str, seconds: float, dry_run: bool = False) -> list[dict]:
    """One GPU job's result: `[{"rate", "unit", "device", "precision", "settings"}]` (and
    `detail` where there is a note); the rate over `settings["timed"]` steps at least (and
    `seconds`), after `settings["warmup"]`; a dry run makes one of each, whatever `seconds`."""
    settings = gpu_work_settings(work, dry_run)
    detail = ""
    if work.startswith("vit"):
        if system.startswith("timm"):
            step, name, chosen, detail = timm_vision(system, settings, dry_run)
        else:
            step, name, chosen = keras_vision(system, settings)
        items = settings["batch"]
    else:
        if system == "hf":
            step, name, chosen = hf_translation(settings)
        else:
            step, name, chosen = keras_translation(system, settings)
        items = settings["batch"] * settings["target_tokens" if settings["train"]
                                             else "new_tokens"]
    rate = measure(step, items, 0.0 if dry_run else seconds, warmup=settings["warmup"],
                   min_calls=settings["timed"])
    result = {"rate": rate, "unit": WORKS[work].unit, "device": name,
              "precision": "bfloat16 mixed" if chosen == "bfloat16" else chosen,
              "settings": settings}
    if detail:
        result["detail"] = detail
    return [result]
