"""What every timing of the zoo builds on: the timing loop (`measure`, `seconds_per_call`,
`interleaved`, and `Stopwatch` for a span that is not one call), the Keras and timm ViTs of a
shape, the random Marian model of a shape, and the stand-in for a torchvision that cannot
load (`zoo.bench.workers` runs the CPU works, `zoo.bench.gpu` the GPU works; the scripts in
benchmarks/ time with the same functions, so that nothing else in the tree reads a clock;
`zoo.bench.latency` keeps each call's time, for percentiles and concurrent clients)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any, Callable, Mapping

CACHE = Path(os.environ.get("ZOO_BENCH_CACHE", Path(tempfile.gettempdir()) / "zoo-bench"))

# Set by `--dry-run`: every `measure` makes one warm-up and one timed call.
DRY_RUN = False


class Stopwatch:
    """The harness's clock, for a span that is not one call of a function (a Keras
    callback's step, a first call whose memory is read before the next ones).

    Example:
        with Stopwatch() as watch:
            model.fit(x, y, epochs=1, verbose=0)
        print(watch.seconds)
    """

    def __init__(self) -> None:
        self.started: float | None = None
        self.seconds: float | None = None

    def start(self) -> "Stopwatch":
        """Starts (or restarts) the clock; returns the stopwatch."""
        self.started = time.perf_counter()
        return self

    def elapsed(self) -> float:
        """The wall seconds since `start()`, the clock left running (a deadline's check)."""
        if self.started is None:
            raise RuntimeError("Stopwatch read before start()")
        return time.perf_counter() - self.started

    def stop(self) -> float:
        """The wall seconds since `start()` (also kept as `seconds`)."""
        self.seconds = self.elapsed()
        return self.seconds

    def __enter__(self) -> "Stopwatch":
        return self.start()

    def __exit__(self, *exception: Any) -> None:
        self.stop()


def seconds_per_call(step: Callable[[], Any], calls: int = 1, warmup: int = 0) -> float:
    """Mean wall seconds of `calls` calls of `step` (each must finish its work before it
    returns), after `warmup` untimed calls."""
    if calls < 1:
        raise ValueError(f"calls must be at least 1; got {calls!r}")
    for _ in range(warmup):
        step()
    with Stopwatch() as watch:
        for _ in range(calls):
            step()
    return watch.seconds / calls


def interleaved(steps: Mapping[str, Callable[[], Any]], rounds: int,
                calls: int = 1) -> dict[str, list[float]]:
    """Every round times `calls` calls of each step in turn, the order reversed every other
    round, so that the slow and fast moments of a shared machine fall on each alike (an A/B
    comparison in one process). Warm them up first.

    Returns:
        `{name: [seconds per call in round 1, round 2, ...]}`.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1; got {rounds!r}")
    times: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for number in range(rounds):
        for name in (names if number % 2 == 0 else names[::-1]):
            times[name].append(seconds_per_call(steps[name], calls))
    return times


def measure(step: Callable[[], Any], items: int, seconds: float, warmup: int = 2,
            min_calls: int = 3) -> float:
    """Items per second over calls of `step` (each must finish its work before returning),
    after `warmup` untimed calls, for at least `seconds` and `min_calls` calls; one timed
    call where `seconds` is set and the last warm-up call alone took longer (a step the host runs
    slowly, as PyTorch's bfloat16 on a CPU without AVX-512 BF16: its figure in minutes, not
    hours, and within the job's time limit)."""
    if DRY_RUN:
        warmup, min_calls, seconds = min(warmup, 1), 1, 0.0
    for number in range(warmup):
        started = time.perf_counter()
        step()
        if 0 < seconds < time.perf_counter() - started and number == warmup - 1:
            min_calls = 1
    calls, started = 0, time.perf_counter()
    while calls < min_calls or time.perf_counter() - started < seconds:
        step()
        calls += 1
    return items * calls / (time.perf_counter() - started)


# ---------------------------------------------------------------------- vision
def keras_vit_model(system: str, shape: dict, batch: int) -> tuple[Any, Any]:
    """`(model, images)`: the zoo's VisionTransformer, or keras-hub's ViTBackbone with a
    Dense head on the class token (its logits in float32, as the zoo's), under the global
    dtype policy, and `batch` float32 images of the range each expects."""
    import keras
    import numpy as np

    keras.utils.set_random_seed(0)
    size = shape["image_size"]
    if system == "zoo":
        from zoo.models.vit.model import VisionTransformer

        model = VisionTransformer(dropout=0.0, **shape)
        images = np.random.default_rng(0).uniform(0, 255, (batch, size, size, 3))
    else:
        import keras_hub

        backbone = keras_hub.models.ViTBackbone(
            image_shape=(size, size, 3), patch_size=shape["patch_size"],
            num_layers=shape["num_layers"], num_heads=shape["num_heads"],
            hidden_dim=shape["hidden_dim"], mlp_dim=shape["intermediate_dim"])
        inputs = keras.Input((size, size, 3))
        outputs = keras.layers.Dense(shape["num_classes"], dtype="float32")(
            backbone(inputs)[:, 0])
        model = keras.Model(inputs, outputs)
        images = np.random.default_rng(0).normal(size=(batch, size, size, 3))
    return model, images.astype("float32")


class _TorchvisionStub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stands in for torchvision where it cannot load (timm imports it at module level for
    data transforms and FrozenBatchNorm2d, transformers on importing `MarianMTModel`; the
    models measured use none of it)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> Any:
        return _StubModule(spec.name)

    def exec_module(self, module: Any) -> None:
        pass


def torchvision_or_stub(installed_only: bool = False) -> str:
    """Imports torchvision, or stands `_TorchvisionStub` in for it where it does not load
    beside the CPU torch (PyPI's torchvision, which timm's dependencies and so the `bench`
    extra install, is a CUDA build whose operators do not register: "operator
    torchvision::nms does not exist"). With `installed_only`, nothing where torchvision is
    not installed at all (transformers' vision models run without it, and cannot parse the
    stub's version). Returns a note when it was stubbed, else ""."""
    if installed_only and importlib.util.find_spec("torchvision") is None:
        return ""
    if any(isinstance(finder, _TorchvisionStub) for finder in sys.meta_path):
        return "torchvision stubbed"
    try:
        import torchvision  # noqa: F401
    except Exception as error:  # noqa: BLE001 (a CUDA build without its libraries, etc.)
        for name in [m for m in sys.modules if m.startswith("torchvision")]:
            del sys.modules[name]
        sys.meta_path.insert(0, _TorchvisionStub())
        return f"torchvision stubbed ({type(error).__name__}); the model does not use it"
    return ""


def import_timm_vision_transformer() -> tuple[Any, str]:
    """timm's VisionTransformer class, and a note when torchvision had to be stubbed."""
    note = torchvision_or_stub()
    from timm.models.vision_transformer import VisionTransformer

    return VisionTransformer, note


def timm_vit_model(shape: dict) -> tuple[Any, str]:
    """timm's VisionTransformer of `shape` (random weights, seed 0), and a note when
    torchvision had to be stubbed."""
    import torch

    VisionTransformer, note = import_timm_vision_transformer()
    torch.manual_seed(0)
    return VisionTransformer(
        img_size=shape["image_size"], patch_size=shape["patch_size"],
        embed_dim=shape["hidden_dim"], depth=shape["num_layers"], num_heads=shape["num_heads"],
        mlp_ratio=shape["intermediate_dim"] / shape["hidden_dim"],
        num_classes=shape["num_classes"]), note


# ---------------------------------------------------------------------- translation
def random_marian_model(shape: dict, vocabulary_size: int, pad_id: int, end_id: int,
                        max_positions: int) -> Any:
    """A random-weight (seed 0) `MarianMTModel` of `shape` (the zoo's Translator arguments
    `hidden_dim`, `num_encoder_layers`, `num_decoder_layers`, `num_heads`,
    `intermediate_dim`), no dropout, ReLU as the zoo's; it starts decoding with `pad_id`, as
    Marian does."""
    import torch

    torchvision_or_stub()
    from transformers import MarianConfig, MarianMTModel

    torch.manual_seed(0)
    config = MarianConfig(
        vocab_size=vocabulary_size, decoder_vocab_size=vocabulary_size,
        d_model=shape["hidden_dim"], encoder_layers=shape["num_encoder_layers"],
        decoder_layers=shape["num_decoder_layers"], encoder_attention_heads=shape["num_heads"],
        decoder_attention_heads=shape["num_heads"], encoder_ffn_dim=shape["intermediate_dim"],
        decoder_ffn_dim=shape["intermediate_dim"], activation_function="relu",
        max_position_embeddings=max_positions, pad_token_id=pad_id, eos_token_id=end_id,
        decoder_start_token_id=pad_id, forced_eos_token_id=None,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    return MarianMTModel(config)


class _StubModule(types.ModuleType):
    __path__: list = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _AnyAttribute(name, (), {})


class _AnyAttribute(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _AnyAttribute(name, (), {})
