"""What each `zoo` subcommand does, once its flags are parsed (zoo/cli/parser.py builds them).

Each `cmd_*` function takes the parsed `argparse.Namespace` and imports what it needs (Keras,
TensorFlow, a model) only when it runs, so that `zoo --help` loads none of it.

`zoo translate` reads stdin lazily, in batches of at most `TRANSLATE_BATCH` lines (fewer when
no more input is ready yet), and writes (and flushes) each batch's translations before
reading on: one output line per input line, in order, in bounded memory, and a line piped in
alone is answered without waiting for more. A stdin line (or TEXT argument) that is not valid
UTF-8 fails alone: its output line is empty, a `zoo: warning: line N of stdin ...` (`argument
N ...`) names it on stderr, and once every line is done the command ends with a one-line
summary and exit status 1 (some lines failed; the rest are translated). A line or argument
longer than the model's `source_character_cap` characters (4,096 for the shipped translator,
zoo/text/length_cap.py) is cut to them before it is tokenized, with a warning that names it;
of a stdin line only that much is kept in memory, the rest is read and dropped
(zoo/cli/line_reader.py), so an endless line (`zoo translate < /dev/zero`) is answered at
once and then read on at constant memory until the input ends or Ctrl-C (status 130). When
the reader of stdout goes away (`zoo translate < big.txt | head`), it stops quietly with
status 141, as a filter that SIGPIPE ends.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import typing
from typing import Any, Sequence

from zoo.cli.recipe_flags import RECIPES, recipe_from_args
from zoo.cli.stdout_faults import stdout_to_devnull
from zoo.training.errors import UserError

if typing.TYPE_CHECKING:
    from zoo.cli.line_reader import Line


def cmd_models(args: argparse.Namespace) -> None:
    """`zoo models`: one line per shipped model (name, kind, description), a hybrid ViT's kind
    saying so, then one line per architecture (the untrained shapes `--architecture` takes)."""
    from zoo.hub.loader import list_models
    from zoo.models.architectures import architectures
    import zoo.models.causal_lm.architectures  # noqa: F401  (registers; no Keras import)
    import zoo.models.translator.architectures  # noqa: F401
    import zoo.models.vit.architectures  # noqa: F401
    import zoo.models.clip.architectures  # noqa: F401
    import zoo.models.captioner.architectures  # noqa: F401

    models = list_models()
    if not models:
        print("no shipped models found")
    for name, info in models.items():
        kind = info.get("kind", "?") + (" (hybrid: convolutional stem)"
                                        if info.get("hybrid") else "")
        print(f"{name}\t{kind}\t{info.get('description', '')}")
    kinds = {"Translator": "translator", "VisionTransformer": "vit",
             "GPT2Backbone": "causal-lm", "CLIPBackbone": "clip",
             "ImageCaptioner": "captioner"}
    for name, shape in architectures().items():
        kind = kinds.get(shape.model, shape.model)
        print(f"{name}\t{kind} architecture (untrained)\t{shape.description}")


# Lines of stdin translated (and written) together: bounded memory, prompt output.
TRANSLATE_BATCH = 32
# `zoo translate`'s beam (an export's is fixed in its graph: `zoo export --beam-size`).
TRANSLATE_BEAM_SIZE = 4


def _write_lines(lines: Sequence[str]) -> None:
    """Writes and flushes lines on stdout, so that a reader sees each batch as it is done."""
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()


def _texts_of(batch: Sequence[Line], where: str, cap: int, max_tokens: int) -> list[str]:
    """The texts of a batch of lines (empty for a line that could not be read), saying on
    stderr which lines failed or were cut; `where` names a line, "{number}" in it."""
    from zoo.text.length_cap import cut_warning

    texts = []
    for line in batch:
        name = where.format(number=line.number)
        if line.problem is not None:
            print(f"zoo: warning: {name} {line.problem}; its output line is empty",
                  file=sys.stderr)
        elif line.cut:
            print(f"zoo: warning: {cut_warning(name, cap, max_tokens)}", file=sys.stderr)
        texts.append(line.text or "")
    return texts


def cmd_translate(args: argparse.Namespace) -> int:
    """`zoo translate`: one translation per TEXT argument or line of stdin, written batch by
    batch; returns 1 when some arguments or stdin lines were not UTF-8 (see the module's
    doc). With `--pipeline FILE`, the file's lines on Apache Beam instead
    (zoo/cli/pipeline_commands.py)."""
    if args.pipeline:
        from zoo.cli.pipeline_commands import translate_pipeline

        return translate_pipeline(args)
    from zoo.hub.loader import load
    from zoo.generation.settings import check_search_settings
    from zoo.cli.line_reader import always_ready, argument_lines, batches, stdin_lines
    from zoo.models.translator.model import Translator

    if args.beam_size is None:
        args.beam_size = TRANSLATE_BEAM_SIZE
    model = load(args.model, expect=Translator)
    # A bad --beam-size or --max-length is refused before stdin is read or anything traced.
    check_search_settings(args.beam_size, args.max_length, model.max_target_length)
    # Each text is cut to what the model can read before it is tokenized: bounded memory.
    cap = model.source_character_cap
    if args.text:
        lines: typing.Iterator[Line] = argument_lines(args.text, cap)
        ready, where, what = always_ready, "argument {number}", "arguments"
    else:
        (lines, ready), where, what = stdin_lines(cap), "line {number} of stdin", "lines of stdin"
    first, count, failed = None, 0, 0
    for batch in batches(lines, TRANSLATE_BATCH, ready):
        texts = _texts_of(batch, where, cap, model.max_source_length)
        failed += sum(line.problem is not None for line in batch)
        if first is None:
            first = next((text for text in texts if text.strip()), None)
        count += len(batch)
        translations = model.translate(texts, beam_size=args.beam_size,
                                       max_length=args.max_length)
        try:
            _write_lines(translations)
        except BrokenPipeError:
            # The reader has gone (`zoo translate < big.txt | head`): stop quietly, with the
            # status of a process that SIGPIPE ended, as Unix filters do.
            stdout_to_devnull()
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
        print(f"zoo: error: {failed} of {count} {what} were not valid UTF-8; their output "
              "lines are empty", file=sys.stderr)
        return 1
    return 0


def _printable(path: str) -> str:
    """`path` as stdout can write it: unchanged where it can (a UTF-8 name, or one whose
    bytes were not UTF-8 on a stdout that writes them back, as Python's surrogateescape does
    under the C.UTF-8 locale), else with those bytes as `\\xNN` escapes."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        path.encode(encoding, getattr(sys.stdout, "errors", None) or "strict")
        return path
    except UnicodeEncodeError:
        from zoo.cli.line_reader import argument_bytes

        raw = argument_bytes(path) or path.encode("utf-8")
        return raw.decode("utf-8", "backslashreplace").encode(
            encoding, "backslashreplace").decode(encoding)


def cmd_classify(args: argparse.Namespace) -> int:
    """`zoo classify`: `path<TAB>label<TAB>probability` lines, top-k per image; with
    `--pipeline FOLDER`, a folder's images on Apache Beam (zoo/cli/pipeline_commands.py)."""
    if args.pipeline:
        from zoo.cli.pipeline_commands import classify_pipeline

        return classify_pipeline(args)
    if not args.images:
        raise UserError("classify needs IMAGE arguments (or --pipeline FOLDER)")
    if args.labels is not None:
        return _classify_zero_shot(args)
    import numpy as np

    from zoo.hub.loader import load
    from zoo.models.vit.model import VisionTransformer

    model = load(args.model, expect=VisionTransformer)
    images = image_arguments(args, model.image_size)
    results = model.classify(images, top_k=args.top_k)
    for path, top in zip(args.images, results):
        shown = _printable(path)
        for label, probability in top:
            print(f"{shown}\t{label}\t{probability:.4f}")
    if args.attention:
        from zoo.recipes.plots import plot_attention_overlay

        if model.is_hybrid:  # its tokens see most of the image: rollout would light it all
            heat = model.class_token_attention(images[0][None])[0]
            title = (f"class token's attention, last layer, heads averaged,\nover the "
                     f"{heat.shape[0]} x {heat.shape[1]} stem map (upsampled)")
        else:
            heat = np.asarray(model.attention_rollout(images[0][None]))[0]
            title = f"attention rollout over {model.num_layers} layers, heads averaged"
        label, probability = results[0][0]
        plot_attention_overlay(images[0], heat, args.attention, title=title,
                               label=f"{label} ({probability:.2f})")
        print(f"wrote the attention map of {args.images[0]} to {args.attention}",
              file=sys.stderr)


def image_arguments(args: argparse.Namespace, image_size: Any) -> Any:
    """The IMAGE arguments decoded at the model's `image_size` into one uint8 array, once
    they are known to fit in memory with the float32 copy the model makes of them all
    (`zoo.training.memory_bounds.check_decoded_images`): one line naming them and --model,
    before the first is decoded."""
    from zoo.training.image_files import load_images
    from zoo.training.memory_bounds import check_decoded_images

    count = len(args.images)
    check_decoded_images(
        count, image_size, f"zoo {args.command}", f"the {count:,} IMAGE arguments",
        f"the image size of --model {args.model}",
        {f"the float32 copy of the {count:,} IMAGE arguments for --model {args.model}":
         4 * count})
    return load_images(args.images, image_size)


def notes_on_stderr() -> typing.ContextManager:
    """Within the block, what the work prints (Keras' progress, a recipe's notes) goes to
    stderr: stdout holds only the command's result, printed after the block, so that it
    pipes into a parser (`zoo finetune ... | jq`)."""
    return contextlib.redirect_stdout(sys.stderr)


def _classify_zero_shot(args: argparse.Namespace) -> None:
    """`zoo classify --labels A,B --model CLIP IMAGE ...`: the same lines as a ViT's, the
    labels scored by a CLIP (`CLIP.classify`)."""
    labels = [label.strip() for label in args.labels.split(",")]
    if not all(labels) or len(set(labels)) != len(labels):
        raise UserError(f"--labels must be distinct, non-empty, comma-separated labels; got "
                        f"{args.labels!r}")
    if args.attention:
        raise UserError("--attention draws a ViT's attention; it does not go with --labels")
    from zoo.hub.loader import load
    from zoo.models.clip.model import CLIP

    model = load(args.model, expect=CLIP)
    images = image_arguments(args, model.backbone.image_size)
    results = model.classify(images, labels, top_k=args.top_k, template=args.template)
    for path, top in zip(args.images, results):
        for label, probability in top:
            print(f"{_printable(path)}\t{label}\t{probability:.4f}")


def cmd_caption(args: argparse.Namespace) -> None:
    """`zoo caption`: one `path<TAB>caption` line per image, in the order given."""
    from zoo.hub.loader import load
    from zoo.models.captioner.captioner import ImageCaptioner

    model = load(args.model, expect=ImageCaptioner)
    images = image_arguments(args, tuple(model.encoder.image_shape[:2]))
    captions = model.caption(images, beam_size=args.beam_size, max_length=args.max_length)
    _write_lines([f"{_printable(path)}\t{caption}"
                  for path, caption in zip(args.images, captions)])


def cmd_train(args: argparse.Namespace) -> None:
    """`zoo train` / `zoo finetune`: runs the recipe and prints its final metrics as JSON
    (the only thing on stdout; progress and notes go to stderr)."""
    import json

    recipe = recipe_from_args(RECIPES[args.command, args.task], args)
    if args.task == "vit":  # settings the data cannot honour fail before TensorFlow loads
        from zoo.recipes.data_fit import check_output_outside_data, count_images, fit_to_data

        check_output_outside_data(recipe)
        count = count_images(recipe.data, recipe.limit_per_class)
        if count is not None:
            fit_to_data(recipe, count, say=lambda line: None)  # the run says it again
    with notes_on_stderr():
        if args.task == "translator":
            from zoo.recipes.translator import train_translator

            metrics = train_translator(recipe)
        elif args.task == "lm":
            from zoo.recipes.causal_lm import finetune_causal_lm

            metrics = finetune_causal_lm(recipe)
        else:
            from zoo.recipes.vit import train_vit

            metrics = train_vit(recipe)
    print(json.dumps({k: v for k, v in metrics.items() if k not in ("history", "recipe")},
                     indent=2))


def cmd_evaluate(args: argparse.Namespace) -> None:
    """`zoo evaluate`: BLEU and chrF of a translator, or top-1/top-5 accuracy of a ViT."""
    from zoo.hub.loader import load
    from zoo.models.translator.model import Translator
    from zoo.models.vit.model import VisionTransformer

    with notes_on_stderr():
        model = load(args.model,
                     expect=Translator if args.task == "translator" else VisionTransformer)
    if args.task == "translator":
        from zoo.training.text_data import read_lines
        from zoo.recipes.translator import evaluate_translator

        with notes_on_stderr():
            scores = evaluate_translator(model, read_lines(args.source),
                                         read_lines(args.reference), beam_size=args.beam_size)
        print(f"BLEU {scores['bleu']:.2f}\tchrF {scores['chrf']:.2f}\t"
              f"sentences {scores['sentences']}\t{scores['signature']}")
    else:
        from zoo.recipes.vit import evaluate_vit

        with notes_on_stderr():
            scores = evaluate_vit(model, args.data,
                                  confusion_matrix_path=args.confusion_matrix)
        top5 = "" if scores["top5"] is None else f"top-5 {scores['top5']:.4f}\t"
        print(f"top-1 {scores['top1']:.4f}\t{top5}images {scores['images']}")
        if args.per_class:
            for line in per_class_lines(scores["confusion_matrix"], model.class_names or []):
                print(line)


def per_class_lines(matrix: Any, names: list[str]) -> list[str]:
    """One line a class of a confusion matrix (rows: true class, columns: predicted):
    `NAME<TAB>top-1 F<TAB>images N<TAB>most often taken for OTHER (K)`; classes without
    images are left out."""
    lines = []
    for index, row in enumerate(matrix):
        total = int(row.sum())
        if not total:
            continue
        wrong = [(int(count), other) for other, count in enumerate(row) if other != index]
        count, other = max(wrong, default=(0, index))
        mistaken = f"most often taken for {names[other]} ({count})" if count else "no errors"
        lines.append(f"{names[index]}\ttop-1 {row[index] / total:.4f}\timages {total}\t"
                     f"{mistaken}")
    return lines


def cmd_export(args: argparse.Namespace) -> None:
    """`zoo export`: writes the SavedModel and prints its folder."""
    from zoo.serving.export import export_model

    with notes_on_stderr():
        path = export_model(args.model, args.output, version=args.version, force=args.force,
                            beam_size=args.beam_size, alpha=args.alpha, top_k=args.top_k,
                            name=args.name, progress=True, precision=args.precision)
    print(path)


def cmd_quantize(args: argparse.Namespace) -> None:
    """`zoo quantize`: the model with int8 weights, as a .keras file or a model folder (with
    its manifest); says on stderr what it does and whether int8 pays on this CPU
    (`int8_speed_note`), and prints the model file written (stdout's one line)."""
    from zoo.hub.loader import MODEL_FILE, load, write_manifest
    from zoo.models.quantization import int8_speed_note, quantize_model
    from zoo.training.files.file_store import write_atomically
    from zoo.training.files.new_folders import folder_for
    from zoo.training.files.output_file import check_output_file, check_output_folder

    # Checked before the model loads: FILE.keras as every output file, DIR as every folder.
    folder = None if args.output.endswith(".keras") else os.path.abspath(args.output)
    if folder:
        check_output_folder(args.output)
    out = os.path.join(folder, MODEL_FILE) if folder else os.path.abspath(args.output)
    check_output_file(out, force=args.force, inputs=[args.model])
    # Said first: loading, rewriting every kernel and saving take a while.
    print(f"zoo: quantizing {args.model}: loading it, storing its Dense, EinsumDense and "
          f"embedding weights as {args.mode} with a float scale per channel, and writing {out}",
          file=sys.stderr, flush=True)
    with notes_on_stderr():
        model = quantize_model(load(args.model), args.mode)
    with folder_for(os.path.dirname(out)):  # a failed save leaves no new, empty folder
        write_atomically(out, model.save)  # the old file stays until the new one is whole
        if folder:
            kinds = {"Translator": "translator", "VisionTransformer": "vit",
                     "SentenceEncoder": "sentence-encoder", "CausalLM": "causal-lm",
                     "ImageCaptioner": "captioner", "CLIP": "clip"}
            write_manifest(folder, kind=kinds[type(model).__name__],
                           description=f"{args.model} with {args.mode} weights",
                           preset=os.path.basename(folder), quantization=args.mode)
    print(int8_speed_note(), file=sys.stderr)
    print(out)
