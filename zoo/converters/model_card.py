"""The model card of a converted checkpoint: the `README.md` that `zoo convert` writes beside
`model.keras` and `manifest.json`, as every shipped model in `saved_models/` has one.

One template (`model_card`) for every format: what the model is (its class, architecture and
parameter count, read from the converted model itself), where it came from (the source as
given, the format, the date), what the conversion checked (only what that format's converter
enforces: `FORMAT_CHECKS`), how to use it, and that the original checkpoint's license applies.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

# What a conversion checks, as the card says it (each is enforced in zoo/converters/).
CONFIG_AGAINST_SHAPES = ("every size in config.json agrees with the tensors' shapes, checked "
                         "before the model was built (`Checkpoint.check_sizes`)")
SIZES_FROM_TENSORS = ("the sizes were read from the tensors' shapes (the checkpoint has no "
                      "config), and every tensor's shape was checked as it was copied")
EVERY_TENSOR_USED = ("every tensor of the checkpoint was copied into a weight of the model, "
                     "none left over (`Checkpoint.check_all_used`)")
FINITE_WEIGHTS = ("no tensor holds NaN or infinity (`refuse_non_finite`, when the "
                  "checkpoint was read)")

# The format's name on the command line -> what its converter enforces.
FORMAT_CHECKS: dict[str, tuple[str, ...]] = {
    "hf-vit": (CONFIG_AGAINST_SHAPES, EVERY_TENSOR_USED, FINITE_WEIGHTS),
    "timm-vit": (SIZES_FROM_TENSORS, EVERY_TENSOR_USED, FINITE_WEIGHTS),
    "marian": (CONFIG_AGAINST_SHAPES, EVERY_TENSOR_USED, FINITE_WEIGHTS),
    "minilm": (CONFIG_AGAINST_SHAPES, EVERY_TENSOR_USED, FINITE_WEIGHTS),
    "gpt2": (CONFIG_AGAINST_SHAPES, EVERY_TENSOR_USED, FINITE_WEIGHTS),
    "clip": (CONFIG_AGAINST_SHAPES, EVERY_TENSOR_USED, FINITE_WEIGHTS),
    "vision-encoder-decoder": (CONFIG_AGAINST_SHAPES, EVERY_TENSOR_USED, FINITE_WEIGHTS),
}

# The model's class -> (what it is in words, its `zoo` command line; {model} is the folder).
USAGE: dict[str, tuple[str, str]] = {
    "VisionTransformer": ("an image classifier", "zoo classify --model {model} IMAGE.jpg"),
    "Translator": ("a translator", 'zoo translate --model {model} "A sentence."'),
    "SentenceEncoder": ("a sentence encoder",
                        'python -c "import zoo; print(zoo.load(\'{model}\').embed([\'A '
                        'sentence.\']).shape)"'),
    "CausalLM": ("a causal language model",
                 'zoo generate --model {model} "Once upon a time" --max-new-tokens 40'),
    "CLIP": ("a CLIP dual encoder (zero-shot image classification)",
             "zoo classify --model {model} --labels cat,dog,car IMAGE.jpg"),
    "ImageCaptioner": ("an image captioner", "zoo caption --model {model} IMAGE.jpg"),
}


def _shape(part: Any) -> str:
    """One network's shape in words: its layers, width, heads and vocabulary, where it has
    them as attributes."""
    words = [template.format(getattr(part, key)) for key, template in (
        ("num_layers", "{:,} layers"), ("hidden_dim", "width {:,}"), ("num_heads", "{:,} heads"),
        ("vocabulary_size", "{:,} pieces")) if isinstance(getattr(part, key, None), int)]
    return ", ".join(words)


def _architecture(model: Any) -> str:
    """The model's shape in words, network by network: its halves where it has two (a
    captioner's encoder and decoder, CLIP's vision and text towers), else the model's or its
    backbone's."""
    backbone = getattr(model, "backbone", None)
    halves = [f"{name}: {_shape(getattr(owner, name))}" for owner in (model, backbone)
              for name in ("encoder", "decoder", "vision", "text")
              if getattr(owner, name, None) is not None and _shape(getattr(owner, name))]
    shapes = [_shape(part) for part in (model, backbone) if part is not None and _shape(part)]
    return "; ".join(halves) or next(iter(shapes), "its sizes are in the model's config")


def _parameters(model: Any) -> int:
    """The number of values in the model's weights (built or not as Keras counts it: a task
    whose backbone holds every weight may not be marked built)."""
    return sum(int(math.prod(weight.shape)) for weight in model.weights)


def model_card(model: Any, *, source: str, format: str, folder: str,
               converted_on: datetime.date | None = None) -> str:
    """The README.md model card of a converted model.

    Args:
        model: the converted zoo model (its class and parameter count go on the card).
        source: where the checkpoint came from, as the user gave it.
        format: the checkpoint format, as `zoo convert` names it (a key of `FORMAT_CHECKS`).
        folder: the model folder, for the usage lines.
        converted_on: the date of the conversion (today when None).

    Returns:
        The card's Markdown text.

    Example:
        >>> from zoo.models.causal_lm.causal_lm import CausalLM
        >>> lm = CausalLM.from_architecture("gpt2-tiny")
        >>> lm.ensure_built()
        >>> card = model_card(lm, source="gpt2/", format="gpt2", folder="models/gpt2")
        >>> print(card.splitlines()[0])
        # gpt2 (a causal language model converted from gpt2)
    """
    name = type(model).__name__
    what, command = USAGE.get(name, ("a zoo model", "python -c \"import zoo; zoo.load('{model}')\""))
    day = (converted_on or datetime.date.today()).isoformat()
    checks = "\n".join(f"- {check}" for check in FORMAT_CHECKS[format])
    title = folder.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
    return f"""# {title} ({what} converted from {format})

## What it is
A `zoo.{name}` ({_architecture(model)}), {_parameters(model):,} parameters. It loads with
`zoo.load("{folder}")` or `zoo.{name}.from_preset("{folder}")`.

## Where it came from
Converted by `zoo convert {format}` from `{source}` ({format} checkpoint) on {day}.

## What was checked
{checks}

## How to use it
```python
import zoo
model = zoo.load("{folder}")
```
```
{command.format(model=folder)}
```

## License
The original checkpoint's license applies to these weights; see where `{source}` came from.
"""
