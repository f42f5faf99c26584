"""The vision-and-language works of `zoo bench`: CLIP's image and text embeddings and
zero-shot probabilities (`clip-b32-images`, `clip-b32-texts`, `clip-b32-zero-shot`, and
`clip-b32-embed-256` on a GPU) for the zoo, Hugging Face's `CLIPModel` and keras-hub's
`CLIPBackbone`; captions per second of greedy search (`captioner-greedy`) for the zoo's
`ImageCaptioner` and Hugging Face's `VisionEncoderDecoderModel` (ViT + GPT-2 with
cross-attention; keras-hub has no captioner). All of the zoo architecture's shape, with
random weights.

Every system gets the same inputs: images of random pixels (already normalised, except for
the zoo's captioner, which takes 0..255 images and normalises them inside, as a user calls
it), and texts of `context_length` ids: a start id, random ids, the end id
(the vocabulary's last, where every system reads a text's embedding) and end ids as
padding. The zoo's embeddings are its backbone's `encode_images` / `encode_texts` compiled once
(`zoo.training.compilation`), keras-hub's the same functions as Keras models
(`predict_on_batch`), Hugging Face's `get_image_features` / `get_text_features` eagerly, as
PyTorch runs. A captioner's every image gets exactly `new_tokens` tokens: the end token never
ends a caption (the zoo: its logit at -1e9, `zoo.bench.decoding.end_never_chosen`; Hugging
Face: `min_new_tokens`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from zoo.bench.decoding import architecture, end_never_chosen, timed_rate
from zoo.bench.gpu import autocast, keras_setup, on_device, synchronize, torch_device
from zoo.bench.works import WORKS, family_work_settings

Steps = dict[str, Callable[[], Any]]


def clip_inputs(settings: dict, shape: dict) -> dict:
    """The works' inputs, seed 0: `pixels` (batch, size, size, 3) normal floats, `images`
    the same batch of 0..255 floats, `texts` (batch, context) ids and `labels` (labels,
    context) ids."""
    import numpy as np

    rng = np.random.default_rng(0)
    size, batch = shape["image_size"], settings["batch"]
    vocabulary, context = shape["vocabulary_size"], shape["context_length"]

    def texts(rows: int) -> Any:
        ids = np.full((rows, context), vocabulary - 1, "int32")  # end ids: the padding
        ids[:, 0] = vocabulary - 2  # the start id
        ids[:, 1:settings["text_ids"] + 1] = rng.integers(0, vocabulary - 2,
                                                          (rows, settings["text_ids"]))
        return ids

    return {"pixels": rng.normal(size=(batch, size, size, 3)).astype("float32"),
            "images": rng.uniform(0, 255, (batch, size, size, 3)).astype("float32"),
            "texts": texts(batch), "labels": texts(settings.get("labels", 1))}


def _placed(array: Any) -> Any:
    """`array` on JAX's default device (a GPU where there is one) on JAX, else as it is."""
    import keras

    return on_device(array) if keras.backend.backend() == "jax" else array


def _softmax(logits: Any) -> Any:
    import numpy as np

    logits = np.asarray(logits, "float64")
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------------- CLIP
@functools.lru_cache(maxsize=None)
def zoo_clip_functions(name: str) -> tuple[Callable, Callable, float]:
    """The zoo's CLIP of architecture `name` (random weights, seed 0): its backbone's
    `encode_images` and `encode_texts`, each compiled once per input shape, and its
    similarity scale; built once per process (a worker runs one work; the tests run many,
    and share the compiled functions)."""
    import keras

    from zoo.models.clip.model import CLIP
    from zoo.training.compilation import compile_for_backend

    keras.utils.set_random_seed(0)
    backbone = CLIP.from_architecture(name).backbone
    backbone.build()
    return (compile_for_backend(lambda p: backbone.encode_images(p, training=False), backbone),
            compile_for_backend(lambda i: backbone.encode_texts(i, training=False), backbone),
            float(backbone.similarity_scale()))


def zoo_clip(settings: dict, shape: dict, inputs: dict) -> Steps:
    """`{"images", "texts", "zero-shot"}` steps of the zoo's CLIP; zero-shot as its
    `CLIP.zero_shot` computes it: both towers compiled, the scaled cosine similarities and
    their softmax on the host."""
    import numpy as np

    images, texts, scale = zoo_clip_functions(settings["architecture"])
    pixels, ids = _placed(inputs["pixels"]), _placed(inputs["texts"])
    labels = _placed(inputs["labels"])

    def unit(x: Any) -> Any:
        x = np.asarray(x, "float64")
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    return {"images": lambda: np.asarray(images(pixels)),
            "texts": lambda: np.asarray(texts(ids)),
            "zero-shot": lambda: _softmax(scale * unit(images(pixels)) @ unit(texts(labels)).T)}


def keras_hub_clip(shape: dict, inputs: dict) -> Steps:
    """The same steps of keras-hub's `CLIPBackbone` (its vision and text encoders of the
    shape, random weights): its embedding functions as Keras models, `predict_on_batch`."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    size, context = shape["image_size"], shape["context_length"]
    vision = keras_hub.models.CLIPVisionEncoder(
        patch_size=shape["patch_size"], hidden_dim=shape["vision_hidden_dim"],
        num_layers=shape["vision_num_layers"], num_heads=shape["vision_num_heads"],
        intermediate_dim=shape["vision_intermediate_dim"], image_shape=(size, size, 3))
    text = keras_hub.models.CLIPTextEncoder(
        vocabulary_size=shape["vocabulary_size"], embedding_dim=shape["text_hidden_dim"],
        hidden_dim=shape["text_hidden_dim"], num_layers=shape["text_num_layers"],
        num_heads=shape["text_num_heads"], intermediate_dim=shape["text_intermediate_dim"],
        max_sequence_length=context)
    backbone = keras_hub.models.CLIPBackbone(vision, text,
                                             projection_dim=shape["embedding_dim"])
    pixels_in = keras.Input((size, size, 3))
    ids_in = keras.Input((context,), dtype="int32")
    images = keras.Model(pixels_in, backbone.get_vision_embeddings(pixels_in))
    texts = keras.Model(ids_in, backbone.get_text_embeddings(ids_in))
    pixels, ids = _placed(inputs["pixels"]), _placed(inputs["texts"])
    labels = _placed(inputs["labels"])
    return {"images": lambda: images.predict_on_batch(pixels),
            "texts": lambda: texts.predict_on_batch(ids),
            "zero-shot": lambda: _softmax(backbone.predict_on_batch(
                {"images": pixels, "token_ids": labels})["vision_logits"])}


def hf_clip(shape: dict, inputs: dict) -> tuple[Steps, str, str]:
    """`(steps, device, precision)`: the same steps of a random `CLIPModel` (seed 0) of the
    shape, under autocast in bfloat16."""
    import torch

    from zoo.bench.steps import torchvision_or_stub

    torchvision_or_stub(installed_only=True)
    from transformers import CLIPConfig, CLIPModel

    where, name, chosen = torch_device()
    vocabulary = shape["vocabulary_size"]
    torch.manual_seed(0)
    config = CLIPConfig(
        text_config=dict(vocab_size=vocabulary, hidden_size=shape["text_hidden_dim"],
                         intermediate_size=shape["text_intermediate_dim"],
                         num_hidden_layers=shape["text_num_layers"],
                         num_attention_heads=shape["text_num_heads"],
                         max_position_embeddings=shape["context_length"],
                         bos_token_id=vocabulary - 2, eos_token_id=vocabulary - 1,
                         pad_token_id=vocabulary - 1),
        vision_config=dict(hidden_size=shape["vision_hidden_dim"],
                           intermediate_size=shape["vision_intermediate_dim"],
                           num_hidden_layers=shape["vision_num_layers"],
                           num_attention_heads=shape["vision_num_heads"],
                           image_size=shape["image_size"], patch_size=shape["patch_size"]),
        projection_dim=shape["embedding_dim"])
    model = CLIPModel(config).eval().to(where)
    pixels = torch.from_numpy(inputs["pixels"]).permute(0, 3, 1, 2).contiguous().to(where)
    ids = torch.from_numpy(inputs["texts"].astype("int64")).to(where)
    labels = torch.from_numpy(inputs["labels"].astype("int64")).to(where)

    def run(call: Callable[[], Any]) -> Callable[[], Any]:
        def step() -> None:
            with torch.inference_mode(), autocast(where, chosen):
                call()
            synchronize(where)
        return step

    steps = {"images": run(lambda: model.get_image_features(pixel_values=pixels)),
             "texts": run(lambda: model.get_text_features(input_ids=ids)),
             "zero-shot": run(lambda: model(input_ids=labels, pixel_values=pixels)
                              .logits_per_image.softmax(-1).cpu())}
    return steps, name, chosen


def clip(work: str, system: str, settings: dict) -> tuple[Steps, str, str]:
    """`(steps, device, precision)` of `work`'s towers: one step per variant."""
    shape = architecture(settings["architecture"])
    inputs = clip_inputs(settings, shape)
    if system == "hf":
        steps, name, chosen = hf_clip(shape, inputs)
    else:
        name, chosen = keras_setup()
        steps = (zoo_clip(settings, shape, inputs) if system == "zoo"
                 else keras_hub_clip(shape, inputs))
    towers = settings["towers"].split(" and ")
    return {tower: steps[tower] for tower in towers}, name, chosen


# ---------------------------------------------------------------------- captioner
def zoo_captioner(settings: dict, images: Any) -> Callable[[], Any]:
    """The zoo's `ImageCaptioner.search`, greedy, exactly `new_tokens` tokens."""
    import keras

    from zoo.models.captioner.captioner import ImageCaptioner

    keras.utils.set_random_seed(0)
    model = end_never_chosen(ImageCaptioner).from_architecture(
        settings["architecture"], dropout=0.0, attention_dropout=0.0)
    model.ensure_built()
    new = settings["new_tokens"]

    def step() -> None:
        tokens, _ = model.search(images, beam_size=1, max_length=new)
        assert tokens.shape[1] == new and not (tokens == model.end_id).any()

    return step


def hf_captioner(settings: dict, images: Any) -> tuple[Callable[[], Any], str, str]:
    """`(step, device, precision)`: a random `VisionEncoderDecoderModel` (ViT + GPT-2 with
    cross-attention, seed 0) of the architecture, `generate` greedy with `min_new_tokens`."""
    import torch

    from zoo.bench.steps import torchvision_or_stub

    torchvision_or_stub(installed_only=True)
    from transformers import (GPT2Config, ViTConfig, VisionEncoderDecoderConfig,
                              VisionEncoderDecoderModel)

    where, name, chosen = torch_device()
    shape = architecture(settings["architecture"])
    encoder, decoder = shape["encoder"], shape["decoder"]
    end = decoder["vocabulary_size"] - 1
    torch.manual_seed(0)
    config = VisionEncoderDecoderConfig.from_encoder_decoder_configs(
        ViTConfig(image_size=encoder["image_size"], patch_size=encoder["patch_size"],
                  hidden_size=encoder["hidden_dim"], num_hidden_layers=encoder["num_layers"],
                  num_attention_heads=encoder["num_heads"],
                  intermediate_size=encoder["intermediate_dim"],
                  layer_norm_eps=encoder["layer_norm_epsilon"], hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0),
        GPT2Config(vocab_size=decoder["vocabulary_size"], n_positions=decoder["max_positions"],
                   n_embd=decoder["hidden_dim"], n_layer=decoder["num_layers"],
                   n_head=decoder["num_heads"], n_inner=decoder["intermediate_dim"],
                   resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, add_cross_attention=True,
                   is_decoder=True, bos_token_id=end, eos_token_id=end))
    for key in ("decoder_start_token_id", "bos_token_id", "eos_token_id", "pad_token_id"):
        setattr(config, key, end)  # as nlpconnect/vit-gpt2-image-captioning has them
    model = VisionEncoderDecoderModel(config).eval().to(where)
    pixels = torch.from_numpy(images / 127.5 - 1).permute(0, 3, 1, 2).contiguous().to(where)
    new = settings["new_tokens"]

    def step() -> None:
        with torch.inference_mode(), autocast(where, chosen):
            out = model.generate(pixels, max_new_tokens=new, min_new_tokens=new,
                                 do_sample=False, num_beams=1, decoder_start_token_id=end,
                                 pad_token_id=end, eos_token_id=end)
        synchronize(where)
        assert out.shape[1] == new + 1, out.shape  # the start token, then the caption

    return step, name, chosen


# ---------------------------------------------------------------------- one job
def run(work: str, system: str, seconds: float, dry_run: bool = False) -> list[dict]:
    """One job's results: one per tower (`variant` "images" / "texts" where a work times
    both), or the captions per second; with the device, precision and settings it ran."""
    import numpy as np

    settings = family_work_settings(work, dry_run)
    name = ""
    if work.startswith("clip"):
        steps, name, chosen = clip(work, system, settings)
    else:
        size = architecture(settings["architecture"])["encoder"]["image_size"]
        images = np.random.default_rng(0).uniform(
            0, 255, (settings["batch"], size, size, 3)).astype("float32")
        if system == "hf":
            step, name, chosen = hf_captioner(settings, images)
        else:
            name, chosen = keras_setup()
            step = zoo_captioner(settings, images)
        steps = {"captions": step}
    results = []
    for variant, step in steps.items():
        rate = timed_rate(step, settings["batch"], settings, seconds, dry_run)
        result = {"rate": rate, "unit": WORKS[work].unit, "settings": settings,
                  "precision": "bfloat16 mixed" if chosen == "bfloat16" else chosen,
                  **({"device": name} if name else {})}
        if len(steps) > 1:
            result["variant"] = variant
        results.append(result)
    return results
