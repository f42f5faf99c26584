"""int8 weights for the zoo's models, through Keras' own quantization.

    model = zoo.load("translator-multi30k-en-de")
    quantize_model(model)               # in place: Keras' `Model.quantize("int8")`
    model.save("translator-int8.keras") # loads with zoo.load / keras.saving.load_model
    model.translate(["A dog runs."])

What changes (Keras' int8 scheme, as its `Dense`, `EinsumDense` and `Embedding` have it):
every `Dense` and `EinsumDense` kernel is stored as int8 with one float32 scale per output
channel (abs-max: `q = round(w * 127 / max|w|)`). On JAX each input row is quantized the
same way on the fly, so the product is int8 x int8 with int32 sums, rescaled to float; on
TensorFlow (`predict`, the translator's searches under XLA, an exported SavedModel as the
model server runs it) the int8 weights are widened to float32 at call time instead
(`zoo.layers.int8_route`, `route_int8_layers`): one route whatever the batch, so that an
input's answer does not depend on what shares its request, and the Python model gives its
export's answers. The zoo's `TokenEmbedding` (the translator's tied embedding and output
projection, GPT-2's token table that is also its head, in the causal LM and the captioner's
decoder, the sentence encoder's word table) keeps one scale per token row, which serves both
the lookup and that token's logit: `logits = (h @ q^T) / s`, each token's int8 row divided by
its own scale, so the tied head reads the very table the lookup reads, and no float copy of
it is kept (it is GPT-2 small's largest weight, 39M of its 124M); Keras' `Embedding`
likewise. Biases, norms, position tables, the ViT's patch projection (a convolution), class
token and float32 head stay as they are: together under 1% of the weights.

Saving: Keras saves a subclassed model's config, not its layers', and our layers create
their float sub-layers in `build()`; so the model's own dtype policy becomes a
`keras.dtype_policies.DTypePolicyMap` naming each quantized layer by its path inside the
model (`encoder_0/self_attention/query`, with or without the model's name in front). A
loaded model hands that map to its layers as they are built, and each layer the map names
builds int8 variables before the weights load (keras-hub's quantized presets work the same
way). A task saved by its parts (the causal LM's backbone, the captioner's encoder and
decoder, CLIP's towers) rebuilds each part from the part's own config, before the model's
policy exists: each part that holds int8 layers keeps the same map in its config. A float
model's config is unchanged.
`zoo.load` then gives each layer its own policy from the map (`settle_loaded_policies`):
Keras' layers save their scales only when their own policy says int8.

Size, not speed, where it is served: without XLA, TensorFlow's int8 product is slower than
its float32 one, and widening the weights at every call costs more than reading float32
ones. Served as the model server runs it, the int8 `translator-multi30k-en-de` was several
times slower than float32 on 2 Intel Xeon cores with AVX-512 VNNI and AMX, and slower at 32
sentences on 2 AMD EPYC cores with AVX2 (the figures: docs/benchmarks.md, "int8 exports
served"). Its `variables/` are 0.26x float32's. `zoo quantize` says so in one line
(`int8_speed_note`).
"""

from __future__ import annotations

import re
import warnings
from typing import Any, Callable

import keras

from zoo.training.errors import UserError
from zoo.layers.int8_route import route_int8_layer
from zoo.layers.keras_internals import (nested_layers, one_garbage_collection,
                                        resolve_policy_map)

MODES = ("int8",)
# The CPU flags that decide how fast int8 and float32 products run, as /proc/cpuinfo names them.
CPU_FEATURES = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "amx_bf16")
# The model classes whose saving and serving the zoo checks with int8 weights.
QUANTIZABLE = ("Translator", "VisionTransformer", "SentenceEncoder", "CausalLM",
               "ImageCaptioner", "CLIP")


def quantized_layers(model: keras.Model) -> list[keras.layers.Layer]:
    """The layers of `model` that hold quantized weights (empty for a float model)."""
    return [layer for layer in nested_layers(model)
            if layer.quantization_mode is not None]


def quantization_mode(model: keras.Model) -> str | None:
    """"int8" for a model that `quantize_model` quantized (or one loaded from its file),
    None for a float model."""
    modes = {layer.quantization_mode for layer in quantized_layers(model)}
    return modes.pop() if len(modes) == 1 else (None if not modes else "mixed")


def refuse_quantized_training(model: keras.Model, source: str) -> None:
    """Refuses to fine-tune a quantized model: its int8 kernels are not trainable variables
    (Keras trains float weights only), so `fit` would fail deep inside. Fine-tune the float
    model and quantize the result (`zoo quantize`) instead; the zoo does not dequantize, since
    that would silently train on a model with the quantization's rounding baked in.

    Args:
        model: the loaded model to be fine-tuned.
        source: how the user named it (the `--model` value), for the message.

    Raises:
        zoo.UserError: `model` holds a quantized layer; one line naming `source`.
    """
    mode = quantization_mode(model)
    if mode is not None:
        raise UserError(f"--model {source} is quantized ({mode}), and a quantized model cannot "
                        "be fine-tuned; fine-tune the float model, then quantize the result")


def _check(model: Any, mode: Any) -> None:
    if not isinstance(mode, str) or mode not in MODES:
        raise UserError(f"quantization mode must be one of {', '.join(MODES)}; got {mode!r}")
    kind = type(model).__name__
    if not isinstance(model, keras.Model) or kind not in QUANTIZABLE:
        raise UserError(f"quantize takes a {', '.join(QUANTIZABLE[:-1])} or "
                        f"{QUANTIZABLE[-1]}; got a {kind}")
    if quantization_mode(model) is not None:
        raise UserError(f"this {kind} is already quantized ({quantization_mode(model)}); "
                        "quantize the float model")
    lora = getattr(model, "lora_layers", lambda: [])()
    if lora:
        raise UserError(f"this {kind} has LoRA factors ({lora[0].path}); merge_lora() it "
                        "before quantizing")
    if model.compute_dtype == "float16":
        raise UserError(f"int8 weights need a float32 or bfloat16 model; this {kind} "
                        f"computes in float16 ({model.dtype_policy.name})")


def _ensure_built(model: keras.Model) -> None:
    """Builds every variable (Keras quantizes built layers only)."""
    from zoo.models.sentence_encoder.model import SentenceEncoder
    from zoo.models.vit.model import VisionTransformer

    if isinstance(model, VisionTransformer):
        if not model.built:
            model.build((None, *model.image_shape))
    elif isinstance(model, SentenceEncoder):
        if not model.built:
            model.build(None)
    else:  # the translator and the tasks of parts (causal LM, captioner, CLIP)
        model.ensure_built()


def _parts(model: keras.Model) -> list[keras.layers.Layer]:
    """The layers a task saves as nested objects of its config (a causal LM's backbone and
    preprocessor: `Task._serialised_parts`); [] for a model saved by its plain arguments."""
    parts = (getattr(model, name, None) for name in getattr(model, "_serialised_parts", ()))
    return [part for part in parts if isinstance(part, keras.layers.Layer)]


def _shares_the_policy(model: keras.Model) -> Callable[[keras.layers.Layer], bool]:
    """Whether a layer is built and shares the model's dtype policy, or that of a part the
    model saves by itself (a loaded causal LM's backbone has a policy object of its own), as
    opposed to a layer made with a dtype of its own (the ViT's float32 head). A layer never
    built (a preprocessor, which holds no weight) is left out: Keras refuses to quantize it."""
    shared = {id(model.dtype_policy), *(id(part.dtype_policy) for part in _parts(model))}
    return lambda layer: layer.built and id(layer.dtype_policy) in shared


def _policy_map(model: keras.Model) -> keras.dtype_policies.DTypePolicyMap:
    """The model's policy with an entry for every quantized layer: the layer's path inside
    the model, with or without the model's name in front (a model that Keras builds from
    its build config, as the ViT, names itself in its layers' paths; one built by its first
    call, as the translator, does not), as a pattern that `DTypePolicyMap` matches whole."""
    prefix = f"{model.path}/" if model.path else ""
    optional_name = f"(?:{re.escape(model.name)}/)?"
    policies = {optional_name + re.escape(layer.path.removeprefix(prefix)): layer.dtype_policy
                for layer in quantized_layers(model)}
    return keras.dtype_policies.DTypePolicyMap(default_policy=model.dtype_policy,
                                               policy_map=policies)


def quantize_model(model: keras.Model, mode: str = "int8") -> keras.Model:
    """Quantizes a zoo model's weights to int8 in place, so that it computes, saves, loads
    and exports as an int8 model.

    Keras' `Model.quantize(mode)` quantizes every `Dense`, `EinsumDense` and `Embedding`,
    and the zoo's `TokenEmbedding`, per output channel (per token for embeddings); the
    model's dtype policy then names those layers, so that `model.save` writes a file that
    `zoo.load` and `keras.saving.load_model` rebuild with int8 weights. Compiled searches,
    generation functions and predict functions are dropped (they read the float weights).
    A tied head (the translator's, GPT-2's) computes its logits from the int8 token table
    and its per-token scales (the module docstring).

    The int8 model is about a quarter of the size and buys size, not speed, where
    TensorFlow runs it without XLA (served, `predict` on a CPU): there it was slower than
    float32 on every CPU measured, AVX2 and AVX-512 VNNI with AMX alike (the module
    docstring; `int8_speed_note`).

    Args:
        model: a `Translator`, `VisionTransformer`, `SentenceEncoder`, `CausalLM`,
            `ImageCaptioner` or `CLIP` with float weights (float32 or bfloat16), without
            LoRA factors (merge them first).
        mode: "int8".

    Returns:
        The same model.

    Raises:
        zoo.UserError: another mode, another kind of model, a model already quantized, one
            with LoRA factors, or a float16 model.

    Example:
    >>> import numpy as np
    >>> from zoo.models.vit.model import VisionTransformer
    >>> model = VisionTransformer.from_architecture("vit-cifar-tiny", num_layers=1)
    >>> model = quantize_model(model)
    >>> str(model.encoder_blocks[0].feed_forward.intermediate_dense.kernel.dtype)
    'int8'
    """
    _check(model, mode)
    _ensure_built(model)
    with warnings.catch_warnings(), one_garbage_collection():
        # Keras warns for every layer without a `quantize` (norms, dropout, the position
        # tables): those stay float on purpose.
        warnings.filterwarnings("ignore", message=".*does not have a `quantize` method")
        # Only the layers that share the model's policy: a loaded model hands its policy
        # map to those alone (a layer made with its own dtype, as the ViT's float32 head,
        # is built from that dtype and stays float).
        model.quantize(mode, filters=_shares_the_policy(model))
    model.dtype_policy = _policy_map(model)
    for part in _parts(model):
        # A part saved by itself (the causal LM's backbone) is rebuilt from its own config,
        # before the model's policy reaches it: the map travels in that config too.
        if quantized_layers(part):
            part.dtype_policy = model.dtype_policy
    route_int8_layers(model)
    for compiled in ("_search_functions", "_generate_functions"):
        if hasattr(model, compiled):  # compiled searches read the float weights
            setattr(model, compiled, {})
    return model


def settle_loaded_policies(model: keras.Model) -> keras.Model:
    """After loading a quantized model's file: every layer of `model` gets its own policy
    from the model's `DTypePolicyMap`, as `quantize_model` left them, so that the model
    saves again with its scales. `zoo.load` calls this; a float model is left as it is.

    Args:
        model: a built model, as `keras.saving.load_model` returns it.

    Returns:
        The same model.
    """
    if isinstance(model.dtype_policy, keras.dtype_policies.DTypePolicyMap):
        parts = {id(part) for part in _parts(model)}  # they keep the map, to save it again
        for layer in nested_layers(model):
            if id(layer) not in parts:
                resolve_policy_map(layer)
        route_int8_layers(model)
    return model


def route_int8_layers(model: keras.Model) -> int:
    """Lets every int8 `Dense` and `EinsumDense` of `model` pick its product where it is
    traced (`zoo.layers.int8_route`): int8 x int8 on JAX and under XLA, float against the
    widened int8 kernel on TensorFlow without XLA (`predict` on a CPU, an exported
    SavedModel), where TensorFlow's int8 matrix product is the slower one.
    `quantize_model` and `settle_loaded_policies` call this.

    Args:
        model: any model; float layers are left as they are.

    Returns:
        How many layers were routed.
    """
    return sum(route_int8_layer(layer) for layer in nested_layers(model))


def cpu_features(cpuinfo: str | None = None) -> list[str]:
    """The flags of `CPU_FEATURES` that this machine's CPU has (from /proc/cpuinfo; empty
    where it cannot be read).

    Args:
        cpuinfo: the text of /proc/cpuinfo; read from the machine when None.
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            return []
    flags = next((line.split(":", 1)[-1].split() for line in cpuinfo.splitlines()
                  if line.startswith("flags")), [])
    return [flag for flag in CPU_FEATURES if flag in flags]


def int8_speed_note(features: list[str] | None = None) -> str:
    """The line `zoo quantize` prints: on this CPU an int8 model buys size, not speed, where
    it is served or run by TensorFlow without XLA (measured slower than float32 at 1 and 32
    inputs on every CPU tried: the module docstring).

    Args:
        features: the CPU's flags among `CPU_FEATURES`; this machine's when None.

    Example:
    >>> int8_speed_note(["avx2"]).startswith("int8 buys size, not speed, on this CPU (avx2)")
    True
    """
    features = cpu_features() if features is None else features
    named = ", ".join(features) or "none of " + ", ".join(CPU_FEATURES)
    return (f"int8 buys size, not speed, on this CPU ({named}): served or run by "
            "TensorFlow without XLA, int8 models were slower than float32 at 1 and 32 "
            "inputs on every CPU measured (AVX2; AVX-512 VNNI with AMX); docs/benchmarks.md")
