"""Zoo models from checkpoint folders laid out as the hub has them (used by `zoo.hub.handles`).

Each builder takes the folder, its parsed `config.json` and a model name, and returns a
ready model: the ViTs take 0..255 images with the checkpoint's own normalisation built in
and classify with its label names; the OPUS-MT translator carries its `MarianTokenizer`;
the sentence encoder its WordPiece vocabulary.

Weights are read from `model.safetensors` (or its shards); a folder with only
`pytorch_model.bin` is read with `torch.load(..., weights_only=True)`, which runs no pickled
code, when PyTorch is installed (`zoo.hub.pickled_weights`). Every JSON file is read with the
size limit of `zoo.training.files.json_files`; a damaged one is one line naming it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from zoo.converters._config import ConfigFile, config_float
from zoo.converters._tensors import SAFETENSORS_INDEX, load_tensors
from zoo.training.errors import UserError
from zoo.training.files.json_files import read_json_file
from zoo.hub.pickled_weights import read_pytorch_bin

# Hugging Face's ViTImageProcessor defaults (and timm's for the original ViTs).
_HALF = (0.5, 0.5, 0.5)
_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)
# timm ViT sizes -> attention heads (a timm state dict does not record them).
_TIMM_HEADS = {"tiny": 3, "small": 6, "base": 12, "large": 16, "huge": 16}


def checkpoint_tensors(folder: Path) -> Any:
    """What the converters read: the folder itself (safetensors), or the tensors of
    `pytorch_model.bin`.

    Raises:
        FileNotFoundError: no weights in the folder.
        ModuleNotFoundError: only a `.bin` file and no PyTorch.
        UserError: a `.bin` file that is not a PyTorch checkpoint or holds Python objects
            (`zoo.hub.pickled_weights.read_pytorch_bin`).
    """
    if (folder / "model.safetensors").exists() or (folder / SAFETENSORS_INDEX).exists():
        return folder
    pickled = folder / "pytorch_model.bin"
    if pickled.exists():
        return read_pytorch_bin(pickled)
    raise FileNotFoundError(f"no weights in {folder} (model.safetensors or pytorch_model.bin)")


def _read_json(path: Path) -> ConfigFile:
    """An optional JSON object of the folder (size-limited), empty when the file is absent."""
    if not path.exists():
        return ConfigFile({}, path)
    return ConfigFile(read_json_file(path, expect=dict), path)


def _channels(values: Any, what: str, where: str) -> np.ndarray:
    try:
        array = np.asarray(values if isinstance(values, (list, tuple)) else [values] * 3,
                           "float64").reshape(-1)
    except (TypeError, ValueError):
        array = np.zeros(0)
    if array.size == 1:
        array = np.repeat(array, 3)
    if (array.size != 3 or not np.isfinite(array).all()
            or (what == "std" and (array <= 0).any())):
        raise UserError(f"{where}: the image normalisation {what} {values!r} is not 3 "
                        f"{'positive ' if what == 'std' else ''}per-channel numbers")
    return array


def build_in_normalisation(model: Any, scale: np.ndarray, offset: np.ndarray) -> None:
    """Makes `model` (built with `include_rescaling=False`) take raw images `x` where the
    checkpoint took `x * scale + offset` per channel, by folding the affine map into the
    patch projection (a convolution without padding, so the fold is exact)."""
    projection = model.backbone.patch_embedding.projection
    kernel = np.asarray(projection.kernel.numpy(), "float64")  # (p, p, channels, hidden)
    bias = np.asarray(projection.bias.numpy(), "float64")
    projection.kernel.assign((kernel * scale[None, None, :, None]).astype("float32"))
    projection.bias.assign((bias + np.einsum("ijcd,c->d", kernel, offset)).astype("float32"))


def _normalise(model_builder: Callable[..., Any], mean: Any, std: Any, rescale: float,
               where: str, **kwargs: Any) -> Any:
    """Builds a ViT that takes 0..255 images normalised as `(x * rescale - mean) / std`
    (`where` names the file that gave them, for messages)."""
    mean, std = _channels(mean, "mean", where), _channels(std, "std", where)
    if np.allclose(mean, _HALF) and np.allclose(std, _HALF) and np.isclose(rescale, 1 / 255):
        return model_builder(include_rescaling=True, **kwargs)
    model = model_builder(include_rescaling=False, **kwargs)
    build_in_normalisation(model, rescale / std, -mean / std)
    return model


def build_vit(folder: Path, config: Mapping[str, Any], name: str) -> Any:
    """A `ViTForImageClassification` checkpoint as a `VisionTransformer`."""
    from zoo.converters.hf_vit import vit_from_hf

    return _build_hf_image_classifier(folder, config, name, vit_from_hf)


def build_deit(folder: Path, config: Mapping[str, Any], name: str) -> Any:
    """A `DeiTForImageClassification[WithTeacher]` checkpoint as a `VisionTransformer` with
    DeiT's distillation token (`zoo.converters.hf_vit.deit_from_hf`)."""
    from zoo.converters.hf_vit import deit_from_hf

    return _build_hf_image_classifier(folder, config, name, deit_from_hf)


def _build_hf_image_classifier(folder: Path, config: Mapping[str, Any], name: str,
                               converter: Callable[..., Any]) -> Any:
    """A Hugging Face image classifier's folder through `converter`, with its image
    processor's normalisation built in; `id2label` names the classes."""
    tensors = checkpoint_tensors(folder)
    return _normalise(lambda **kw: converter(tensors, config, **kw),
                      *_image_normalisation(folder), name=name)


def _image_normalisation(folder: Path, mean: Any = _HALF, std: Any = _HALF
                         ) -> tuple[Any, Any, float, str]:
    """`(mean, std, rescale, where)` of the folder's image processor (Hugging Face's
    `preprocessor_config.json`): pixels become `(x * rescale - mean) / std`; `mean` and `std`
    are the processor class's defaults, for a file that names none (ViTImageProcessor's)."""
    processor = _read_json(folder / "preprocessor_config.json")
    normalise = processor.get("do_normalize", True)
    mean = processor.get("image_mean", mean) if normalise else (0.0, 0.0, 0.0)
    std = processor.get("image_std", std) if normalise else (1.0, 1.0, 1.0)
    rescale = (config_float(processor, "rescale_factor", 1 / 255)
               if processor.get("do_rescale", True) else 1.0)
    return mean, std, rescale, processor.path


def build_timm_vit(folder: Path, config: Mapping[str, Any], name: str) -> Any:
    """A timm ViT checkpoint (`config.json` with `architecture` and `pretrained_cfg`)."""
    from zoo.converters.hf_vit import vit_from_timm

    architecture = str(config["architecture"]).split(".", 1)[0]
    size = re.match(r"(?:vit|deit)_(tiny|small|base|large|huge)_patch\d+", architecture)
    if size is None:
        raise UserError(f"the timm architecture {architecture!r} is not supported: the "
                        "attention heads of vit_/deit_{tiny,small,base,large,huge}_patchN "
                        "models are known, others are not")
    if config.get("global_pool", "token") != "token":
        raise UserError(f"the timm model {architecture!r} pools with "
                        f"{config['global_pool']!r}; only class-token pooling is supported")
    pretrained = config.get("pretrained_cfg") or {}
    if not isinstance(pretrained, dict):
        raise UserError(f"{folder / 'config.json'}: pretrained_cfg is not a JSON object")
    tensors = load_tensors(checkpoint_tensors(folder))
    head = tensors.get("head.weight")
    return _normalise(
        lambda **kw: vit_from_timm(tensors, _TIMM_HEADS[size.group(1)], **kw),
        pretrained.get("mean", _IMAGENET_MEAN), pretrained.get("std", _IMAGENET_STD),
        1 / 255, str(folder / "config.json"), name=name,
        class_names=None if head is None or head.ndim != 2 else _timm_class_names(
            config.get("label_names") or pretrained.get("label_names"), head.shape[0],
            folder / "config.json"))


def _timm_class_names(labels: Any, num_classes: int, where: Path) -> list[str] | None:
    """timm's `label_names` when there is one per output of the head; else None (classes
    named class_N) with a warning that names the labels dropped."""
    from zoo.converters.hf_vit import warn_labels_dropped

    if not labels:
        return None
    if not isinstance(labels, (list, tuple)):
        labels = [labels]
    if len(labels) == num_classes:
        return [str(label) for label in labels]
    warn_labels_dropped(f"{where}'s label_names", {i: str(v) for i, v in enumerate(labels)},
                        num_classes)
    return None


def build_marian(folder: Path, config: Mapping[str, Any], name: str) -> Any:
    """A `MarianMTModel` (OPUS-MT) checkpoint as a `Translator` with its tokenizer."""
    from zoo.converters.marian import translator_from_marian
    from zoo.text.marian import MarianTokenizer

    tokenizer = MarianTokenizer.from_folder(folder)
    pad, eos = config.get("pad_token_id"), config.get("eos_token_id")
    if pad is not None and pad != tokenizer.pad_id:
        raise UserError(f"config.json's pad_token_id {pad} is not vocab.json's pad id "
                        f"{tokenizer.pad_id}")
    if eos is not None and not isinstance(eos, list) and eos != tokenizer.end_id:
        raise UserError(f"config.json's eos_token_id {eos} is not vocab.json's end id "
                        f"{tokenizer.end_id}")
    return translator_from_marian(checkpoint_tensors(folder), config,
                                  tokenizer=tokenizer, name=name)


def build_sentence_encoder(folder: Path, config: Mapping[str, Any], name: str) -> Any:
    """A BERT sentence-transformers folder (mean pooling) as a `SentenceEncoder`."""
    from zoo.converters.minilm import assign_bert_weights, check_bert_sizes, encoder_config
    from zoo.models.sentence_encoder.model import SentenceEncoder

    if not (folder / "vocab.txt").is_file():
        raise FileNotFoundError(f"the sentence encoder needs vocab.txt; there is none in "
                                f"{folder}")
    tensors = load_tensors(checkpoint_tensors(folder))
    config = encoder_config(folder)
    check_bert_sizes(config, tensors, folder / "config.json")
    model = SentenceEncoder(**config, name=name)
    assign_bert_weights(model, tensors)
    return model


def build_gpt2(folder: Path, config: Mapping[str, Any], name: str) -> Any:
    """A `GPT2LMHeadModel` checkpoint as a `CausalLM` with its byte-level BPE tokenizer
    (`vocab.json`, `merges.txt`)."""
    from zoo.converters.gpt2 import causal_lm_from_hf
    from zoo.text.byte_pair import BytePairTokenizer

    tokenizer = BytePairTokenizer.from_folder(folder)
    eos = config.get("eos_token_id")
    if isinstance(eos, int) and not isinstance(eos, bool) and eos != tokenizer.end_id:
        raise UserError(f"config.json's eos_token_id {eos} is not vocab.json's "
                        f"{tokenizer.end_token} id {tokenizer.end_id}")
    return causal_lm_from_hf(checkpoint_tensors(folder), config, tokenizer=tokenizer,
                             name=name)


def build_clip(folder: Path, config: Mapping[str, Any], name: str) -> Any:
    """A `CLIPModel` checkpoint as a `CLIP` with its tokenizer and the image processor's
    normalisation (`zoo.converters.clip.clip_from_hf`)."""
    from zoo.converters._config import config_value
    from zoo.converters.clip import clip_from_hf
    from zoo.models.clip.preprocessor import OPENAI_MEAN, OPENAI_STD
    from zoo.text.clip_tokenizer import CLIPTokenizer

    context = config_value(config.get("text_config") or {}, "max_position_embeddings", 77)
    tokenizer = CLIPTokenizer.from_folder(folder, sequence_length=context)
    # CLIP's preprocessor divides by 255 itself: the file's rescale is not read from here.
    mean, std, _, where = _image_normalisation(folder, OPENAI_MEAN, OPENAI_STD)
    mean, std = _channels(mean, "mean", where), _channels(std, "std", where)
    return clip_from_hf(checkpoint_tensors(folder), config, tokenizer=tokenizer,
                        mean=mean.tolist(), std=std.tolist(), name=name)


def build_captioner(folder: Path, config: Mapping[str, Any], name: str) -> Any:
    """A `VisionEncoderDecoderModel` (ViT + GPT-2) as an `ImageCaptioner` that takes 0..255
    images, with its image processor's normalisation and its byte-level BPE tokenizer."""
    from zoo.converters.vision_encoder_decoder import captioner_from_hf
    from zoo.text.byte_pair import BytePairTokenizer

    mean, std, rescale, where = _image_normalisation(folder)
    mean, std = _channels(mean, "mean", where), _channels(std, "std", where)
    return captioner_from_hf(checkpoint_tensors(folder), config,
                             tokenizer=BytePairTokenizer.from_folder(folder),
                             image_scale=(rescale / std).tolist(),
                             image_offset=(-mean / std).tolist(), name=name)


BUILDERS: dict[str, Callable[[Path, Mapping[str, Any], str], Any]] = {
    "vit": build_vit,
    "deit": build_deit,
    "timm-vit": build_timm_vit,
    "marian": build_marian,
    "sentence-encoder": build_sentence_encoder,
    "gpt2": build_gpt2,
    "clip": build_clip,
    "vision-encoder-decoder": build_captioner,
}
