"""The attention zoo: translators, Vision Transformers, GPT-2, CLIP and captioners, with recipes.

    import zoo
    translator = zoo.load("translator-multi30k-en-de")
    translator.translate(["A man is riding a bicycle."])
    zoo.export(translator, "serving")  # serving/translator/1/, for TensorFlow Serving

The model classes are `zoo.Translator`, `zoo.VisionTransformer`, `zoo.SentenceEncoder`,
`zoo.CausalLM`, `zoo.CLIP` and `zoo.ImageCaptioner` (defined in `zoo.models`), the tokenizers
`zoo.SubwordTokenizer` and `zoo.MarianTokenizer` (`zoo.text`).

`import zoo` is cheap: Keras (and TensorFlow) load on first use of a name that needs them,
so `zoo.list_models()` and the `zoo --help` / `zoo models` commands never import them.
A mistake in what the user gave raises `zoo.UserError` (a ValueError; see training/errors.py).
TensorFlow's start-up logs (CUDA and CPU-feature notices) are kept off stderr as the `zoo`
command keeps them; `zoo.verbose()`, or `ZOO_LOG=debug` in the environment, shows them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# `zoo.layers` and `zoo.training` are the repository's top-level `layers/` and `training/`
# folders, mapped there by pyproject.toml's package-dir: a wheel installs them inside zoo/, an
# editable install (`pip install -e .`) finds them where they are. A checkout is used through
# such an install; nothing here adds the checkout's other folders to `zoo`.

# Public name -> the module that defines it and its name there; imported on first access
# (PEP 562).
_LAZY = {
    "CLIP": ("zoo.models.clip.model", "CLIP"),
    "CausalLM": ("zoo.models.causal_lm.causal_lm", "CausalLM"),
    "ImageCaptioner": ("zoo.models.captioner.captioner", "ImageCaptioner"),
    "MarianTokenizer": ("zoo.text.marian", "MarianTokenizer"),
    "SentenceEncoder": ("zoo.models.sentence_encoder.model", "SentenceEncoder"),
    "SubwordTokenizer": ("zoo.text.tokenizer", "SubwordTokenizer"),
    "Translator": ("zoo.models.translator.model", "Translator"),
    "UserError": ("zoo.training.errors", "UserError"),
    "VisionTransformer": ("zoo.models.vit.model", "VisionTransformer"),
    "export": ("zoo.serving.export", "export_model"),
    "list_models": ("zoo.hub.loader", "list_models"),
    "load": ("zoo.hub.loader", "load"),
    "load_weights": ("zoo.hub.loader", "load_weights"),
    "quantize": ("zoo.models.quantization", "quantize_model"),
}

__all__ = ["CLIP", "CausalLM", "ImageCaptioner", "MarianTokenizer", "SentenceEncoder",
           "SubwordTokenizer", "Translator", "UserError", "VisionTransformer", "export", "list_models", "load", "load_weights",
           "quantize", "verbose"]
# Functions whose modules load no Keras or TensorFlow until they run: they start it quietly
# when called. Every other name but `UserError` and `list_models` loads it as it is imported.
_CALLED = ("export", "load", "load_weights", "quantize")
_settings = {"verbose": False}


def verbose(on: bool = True) -> None:
    """Shows TensorFlow's start-up logs (as `ZOO_LOG=debug` does), which `zoo` otherwise keeps
    off stderr while it loads TensorFlow; call it before the first `zoo.load` or model class.

    Args:
        on: False hides them again (for a TensorFlow not loaded yet).
    """
    _settings["verbose"] = bool(on)

if TYPE_CHECKING:
    from zoo.models.captioner.captioner import ImageCaptioner  # noqa: F401
    from zoo.models.causal_lm.causal_lm import CausalLM  # noqa: F401
    from zoo.models.clip.model import CLIP  # noqa: F401
    from zoo.training.errors import UserError  # noqa: F401
    from zoo.models.sentence_encoder.model import SentenceEncoder  # noqa: F401
    from zoo.models.translator.model import Translator  # noqa: F401
    from zoo.models.vit.model import VisionTransformer  # noqa: F401
    from zoo.text.marian import MarianTokenizer  # noqa: F401
    from zoo.text.tokenizer import SubwordTokenizer  # noqa: F401
    from zoo.hub.loader import list_models, load, load_weights  # noqa: F401
    from zoo.serving.export import export_model as export  # noqa: F401
    from zoo.models.quantization import quantize_model as quantize  # noqa: F401


def __getattr__(name: str) -> Any:
    """The lazily imported public names (`zoo.load`, ...) and submodules (`zoo.hub.loader`)."""
    if name == "__version__":
        from zoo.version import zoo_version

        globals()[name] = zoo_version()
        return globals()[name]
    if name in _LAZY:
        module, attribute = _LAZY[name]
        if name not in _CALLED + ("UserError", "list_models"):
            _start_tensorflow()
        value = getattr(importlib.import_module(module), attribute)
        if name in _CALLED:
            value = _starting_tensorflow(value)
        globals()[name] = value
        return value
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise  # the submodule exists but needs a package that is missing
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _start_tensorflow() -> None:
    """TensorFlow's import and device set-up with its start-up logs kept off stderr, unless
    `zoo.verbose()` (zoo/cli/quiet.py's `start_tensorflow_quietly`)."""
    from zoo.cli.quiet import start_tensorflow_quietly

    start_tensorflow_quietly(_settings["verbose"])


def _starting_tensorflow(function: Any) -> Any:
    """`function`, starting TensorFlow quietly (`_start_tensorflow`) when first called."""
    import functools

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        _start_tensorflow()
        return function(*args, **kwargs)

    return call


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | {"__version__"})
