"""A tiny CLIP checkpoint laid out as the hub has it, written by transformers (no download).

`write_tokenizer_files` writes a `vocab.json` / `merges.txt` shaped as OpenAI's: the 256 byte
characters, the same with "</w>", some merges (words of the tests' captions among them), then
`<|startoftext|>` and `<|endoftext|>` as the two last ids. `write_checkpoint` adds a random
`CLIPModel` of two layers, width 32, 32-pixel images with 16-pixel patches, saved with
`save_pretrained` (safetensors).
"""

from __future__ import annotations

import json
from pathlib import Path

# Merges in rank order; each joins two pieces that exist by then.
MERGES = ["t h", "th e</w>", "p h", "ph o", "pho t", "phot o</w>", "o f</w>", "r e", "re d</w>",
          "s q", "sq u", "squ a", "squa r", "squar e</w>", "c a", "ca t</w>", "d o", "do g</w>",
          "b l", "bl u", "blu e</w>", "g r", "gr e", "gre e", "gree n</w>", "c i", "ci r",
          "cir c", "circ l", "circl e</w>", "Ã ©", "' s</w>", "a n", "an d</w>",
          "i t</w>", "s h", "sh i", "shi p</w>"]
MEAN = [0.48145466, 0.4578275, 0.40821073]  # OpenAI CLIP's image normalisation
STD = [0.26862954, 0.26130258, 0.27577711]


def byte_characters() -> list[str]:
    """GPT-2's 256 printable byte characters in OpenAI's vocabulary order (transformers'
    table, not ours)."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return list(bytes_to_unicode().values())


def vocabulary() -> dict[str, int]:
    pieces = byte_characters()
    pieces = pieces + [p + "</w>" for p in pieces]
    for merge in MERGES:
        pieces.append(merge.replace(" ", ""))
    pieces += ["<|startoftext|>", "<|endoftext|>"]
    return {piece: i for i, piece in enumerate(pieces)}


def write_tokenizer_files(folder: Path, pad_token: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocabulary(), ensure_ascii=False),
                                       encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(MERGES) + "\n",
                                       encoding="utf-8")
    if pad_token is not None:
        (folder / "special_tokens_map.json").write_text(json.dumps({"pad_token": pad_token}))
    return folder


def reference_config(context: int = 16, image_size: int = 32, patch: int = 16,
                     projection: int = 24):
    """A tiny random `transformers.CLIPConfig`."""
    from transformers import CLIPConfig

    size = len(vocabulary())
    text = dict(vocab_size=size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=context,
                bos_token_id=size - 2, eos_token_id=size - 1, pad_token_id=size - 1,
                projection_dim=projection)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, image_size=image_size, patch_size=patch,
                  projection_dim=projection)
    return CLIPConfig(text_config=text, vision_config=vision, projection_dim=projection)


def write_checkpoint(folder: Path, seed: int = 0, **sizes) -> Path:
    """A random `CLIPModel` with its tokenizer and image processor files in `folder`."""
    import torch
    from transformers import CLIPModel

    torch.manual_seed(seed)
    model = CLIPModel(reference_config(**sizes)).eval()
    with torch.no_grad():  # away from the initial 2.659 so that a lost scale shows
        model.logit_scale.fill_(1.7)
    model.save_pretrained(folder, safe_serialization=True)
    write_tokenizer_files(folder, pad_token="<|endoftext|>")
    image = model.config.vision_config.image_size
    (folder / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "CLIPImageProcessor", "image_mean": MEAN, "image_std": STD,
        "do_normalize": True, "do_rescale": True, "rescale_factor": 1 / 255,
        "size": {"shortest_edge": image}, "crop_size": {"height": image, "width": image}}))
    return folder
