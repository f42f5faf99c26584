"""The `zoo` command's flags: one small function per subcommand.

    zoo models
    zoo translate [--model M] [--beam-size N] [--attention FILE.png] [TEXT ...]
    zoo translate --pipeline FILE --output FILE --model EXPORT [--workers N] [--force]
                  [--pipeline-options="BEAM FLAGS"]
    zoo classify [--model M] [--top-k K] [--attention FILE.png] IMAGE ...
    zoo caption [--model M] [--beam-size N] [--max-length L] IMAGE ...
    zoo generate --model M [--max-new-tokens N] [--top-p P] [--top-k K] [--temperature T]
                 [--num-beams N] [--seed S] [--repetition-penalty R] [--stop S] [PROMPT ...]
    zoo classify --model CLIP --labels A,B,... [--template T] [--top-k K] IMAGE ...
    zoo classify --pipeline FOLDER --output FILE --model EXPORT [--top-k K] [--workers N]
                 [--force] [--pipeline-options="BEAM FLAGS"]
    zoo train translator|vit [recipe flags]
    zoo finetune translator|vit --model M [recipe flags]
    zoo finetune lm --model M --data FILE.txt [recipe flags]
    zoo evaluate translator --model M --source F --reference F
    zoo evaluate vit --model M --data DIR|tfds:NAME[:SPLIT] [--confusion-matrix FILE.png]
                     [--per-class]
    zoo export M --output DIR [--version N]
    zoo quantize M --output FILE.keras|DIR [--force]
    zoo convert hf-vit|timm-vit|marian|minilm|gpt2|clip|vision-encoder-decoder [SOURCE]
                --output DIR
    zoo bench ...

The recipe flags of `train` and `finetune` are the recipe dataclasses' fields
(zoo/cli/recipe_flags.py). Building the parser loads neither Keras nor TensorFlow.
"""

from __future__ import annotations

import argparse
from typing import Any

from zoo.cli.commands import (
    TRANSLATE_BEAM_SIZE,
    cmd_caption,
    cmd_classify,
    cmd_evaluate,
    cmd_export,
    cmd_models,
    cmd_quantize,
    cmd_train,
    cmd_translate,
)
from zoo.cli.convert_command import add_convert
from zoo.cli.generate_command import add_generate
from zoo.cli.pipeline_commands import add_pipeline_flags
from zoo.cli.recipe_flags import RECIPES, add_field_flags, checked_type, fields_of_recipe
from zoo.recipes.checks import IMAGE_SIZE, LENGTH_PENALTY, POSITIVE_INT, VERSION
from zoo.version import zoo_version

DESCRIPTION = ("The `zoo` command: list, translate, classify, train, evaluate, export and "
               "quantize models.")
DEFAULT_TRANSLATOR = "translator-multi30k-en-de"
DEFAULT_VIT = "vit-cifar10"
# No captioner is shipped: the default is converted from the hub on first use (network).
DEFAULT_CAPTIONER = "hf://nlpconnect/vit-gpt2-image-captioning"
# A count flag outside the recipes (--beam-size, --top-k, --version), checked as it is parsed.
POSITIVE = checked_type(int, POSITIVE_INT)
MODEL_HELP = "shipped name, .keras file or model folder, URL or hub handle"
# What a `train`/`finetune` task's name stands for, in its help line.
TASK_HELP = {"lm": "a causal language model (zoo.CausalLM) on a text file, one example a line"}


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
        recipes: add the recipe flags of `train` and `finetune` (read without importing the
            recipe modules, so Keras stays unloaded); `main` asks for them only for those
            commands.

    Returns:
        The parser; each subcommand's parsed namespace holds its `func(args)` to run.
    """
    parser = argparse.ArgumentParser(prog="zoo", description=DESCRIPTION,
                                     formatter_class=_HelpFormatter)
    _add_verbose(parser, top_level=True)
    parser.add_argument("--version", action="version", version=f"zoo {zoo_version()}",
                        help="print the zoo's version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _subcommand(sub, "models", "list the shipped models and the architectures").set_defaults(func=cmd_models)
    _add_translate(sub)
    _add_classify(sub)
    _add_caption(sub)
    add_generate(sub, _subcommand, MODEL_HELP)
    for command, help_text in (
            ("train", "train a model with the zoo's recipe"),
            ("finetune", "fine-tune a pretrained model (--model) on new data")):
        _add_recipe_command(sub, command, help_text, recipes)
    _add_evaluate(sub)
    _add_export(sub)
    _add_quantize(sub)
    add_convert(sub, _subcommand, POSITIVE, checked_type(int, IMAGE_SIZE))
    _add_bench(sub)
    return parser


def _add_translate(sub: Any) -> None:
    p = _subcommand(sub, "translate", "translate sentences (arguments, or stdin lines)")
    p.add_argument("text", nargs="*", metavar="TEXT",
                   help="sentences to translate; none: one per line from stdin")
    p.add_argument("--model", default=DEFAULT_TRANSLATOR, help=f"translator: {MODEL_HELP}")
    p.add_argument("--beam-size", type=POSITIVE, default=None,
                   help=f"beam width (1: greedy; default: {TRANSLATE_BEAM_SIZE}; with "
                        "--pipeline the export's, set by zoo export --beam-size)")
    p.add_argument("--max-length", type=int, default=None,
                   help="longest translation in tokens (default: the model's)")
    p.add_argument("--attention", metavar="FILE.png",
                   help="draw the first sentence's source-by-target cross-attention")
    add_pipeline_flags(p, "a text file's lines", POSITIVE)
    p.set_defaults(func=cmd_translate)


def _add_classify(sub: Any) -> None:
    p = _subcommand(sub, "classify", "classify images (path<TAB>label<TAB>probability)")
    p.add_argument("images", nargs="*", metavar="IMAGE",
                   help="image files (JPEG, PNG, ...); none with --pipeline")
    p.add_argument("--model", default=DEFAULT_VIT, help=f"ViT: {MODEL_HELP}")
    p.add_argument("--top-k", type=POSITIVE, default=3, help="labels printed per image")
    p.add_argument("--attention", metavar="FILE.png",
                   help="draw the first image with its attention-rollout map")
    p.add_argument("--labels", metavar="A,B,...",
                   help="zero-shot: candidate labels, comma-separated (--model a CLIP)")
    p.add_argument("--template", default="a photo of a {}",
                   help="zero-shot: the prompt each label is put in, {} standing for the "
                        "label (default: 'a photo of a {}')")
    add_pipeline_flags(p, "a folder's images (or a glob)", POSITIVE)
    p.set_defaults(func=cmd_classify)


def _add_caption(sub: Any) -> None:
    p = _subcommand(sub, "caption", "write a caption for each image (path<TAB>caption)")
    p.add_argument("images", nargs="+", metavar="IMAGE", help="image files (JPEG, PNG, ...)")
    p.add_argument("--model", default=DEFAULT_CAPTIONER,
                   help=f"image captioner: {MODEL_HELP} (the default is downloaded and "
                        "converted on first use)")
    p.add_argument("--beam-size", type=POSITIVE, default=4, help="beam width (1: greedy)")
    p.add_argument("--max-length", type=POSITIVE, default=20,
                   help="most tokens of a caption, its end included")
    p.set_defaults(func=cmd_caption)


def _add_recipe_command(sub: Any, command: str, help_text: str, recipes: bool) -> None:
    """`zoo train` or `zoo finetune`, with a `translator` and a `vit` task (and, for
    `finetune`, `lm`: a causal language model) each taking its recipe's flags (when `recipes`
    is set)."""
    p = _subcommand(sub, command, help_text)
    names = [task for recipe_command, task in RECIPES if recipe_command == command]
    tasks = p.add_subparsers(dest="task", required=True, metavar="{" + ",".join(names) + "}")
    for task in names:
        task_help = TASK_HELP.get(task, task)
        task_parser = _subcommand(tasks, task, f"{help_text}: {task_help}")
        if recipes:
            add_field_flags(task_parser, fields_of_recipe(command, task))
    p.set_defaults(func=cmd_train)


def _add_evaluate(sub: Any) -> None:
    """`zoo evaluate translator` and `zoo evaluate vit`, each with its own flags only."""
    p = _subcommand(sub, "evaluate", "score a model on held-out data")
    tasks = p.add_subparsers(dest="task", required=True, metavar="{translator,vit}")
    text = _subcommand(tasks, "translator", "BLEU and chrF of a translator")
    text.add_argument("--model", required=True, help=MODEL_HELP)
    text.add_argument("--source", metavar="FILE", help="source sentences, one a line")
    text.add_argument("--reference", metavar="FILE", help="reference translations, one a line")
    text.add_argument("--beam-size", type=POSITIVE, default=4, help="beam width")
    vit = _subcommand(tasks, "vit", "top-1 and top-5 accuracy of a ViT")
    vit.add_argument("--model", required=True, help=MODEL_HELP)
    vit.add_argument("--data", metavar="DIR", help="folder with one subfolder per class, "
                     "or a TFDS split tfds:NAME[:SPLIT] (split test when absent)")
    vit.add_argument("--confusion-matrix", metavar="FILE.png", help="draw the confusion matrix")
    vit.add_argument("--per-class", action="store_true",
                     help="also print each class's top-1 and its most frequent wrong answer")
    p.set_defaults(func=cmd_evaluate)


def _add_export(sub: Any) -> None:
    p = _subcommand(sub, "export", "write a SavedModel for TensorFlow Serving")
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--output", required=True, metavar="DIR",
                   help="model repository: the SavedModel goes to DIR/NAME/VERSION/, beside "
                        "DIR/models.config and DIR/batching_parameters.txt for the server")
    p.add_argument("--name", default=None,
                   help="served model name (NAME; default: the shipped name or file stem)")
    p.add_argument("--version", type=checked_type(int, VERSION), default=1,
                   help="version folder number")
    p.add_argument("--force", action="store_true", help="replace an existing version")
    p.add_argument("--beam-size", type=POSITIVE, default=4,
                   help="translator: beam width in the graph")
    p.add_argument("--alpha", type=checked_type(float, LENGTH_PENALTY), default=0.6,
                   help="translator: length-penalty exponent in the graph")
    p.add_argument("--top-k", type=POSITIVE, default=5, help="vit: labels returned per image")
    p.add_argument("--precision", choices=["float32", "bfloat16"], default="float32",
                   help="the graph's products in bfloat16 (float32 weights, inputs and "
                        "outputs): faster where the CPU has AMX or AVX-512 BF16, slower "
                        "elsewhere")
    p.set_defaults(func=cmd_export)


def _add_quantize(sub: Any) -> None:
    p = _subcommand(sub, "quantize", "store a model's weights as int8 (Keras' per-channel "
                                     "int8): a smaller file that loads, runs and exports")
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--output", required=True, metavar="PATH",
                   help="a .keras file, or a folder for model.keras and manifest.json")
    p.add_argument("--mode", default="int8", choices=["int8"], help="quantization mode")
    p.add_argument("--force", action="store_true", help="replace an existing model file")
    p.set_defaults(func=cmd_quantize)


def _add_bench(sub: Any) -> None:
    # The standard library only; its workers load the backends.
    from zoo.bench import harness as bench

    p = _subcommand(sub, "bench", "time the zoo against timm, keras-hub, Hugging Face and "
                                  "CTranslate2, each in its own process")
    bench.add_arguments(p)
    p.set_defaults(func=bench.main)
