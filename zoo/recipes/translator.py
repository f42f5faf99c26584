"""The translator's training recipe: data, tokenizer, model, `fit`, checkpoints, BLEU.

`zoo train translator` runs `train_translator`. A run writes everything into its output
folder; started again with the same command after a crash or SIGKILL, it reuses the
tokenizer and continues from the last epoch checkpoint.

    out/tokenizer.model       the joint SentencePiece model
    out/checkpoints/          weights and optimizer state after every epoch
    out/logs/                 TensorBoard
    out/model.keras           the final model (tokenizer inside)
    out/metrics.json          the settings, per-epoch validation BLEU, the final figures

The final `model.keras` and `metrics.json` are written atomically (a temporary file renamed
into place). A folder that holds a finished run, or files the run did not write, is refused
unless `force` is set (see `zoo.training.checkpointing.prepare_run_folder`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import keras
import numpy as np

from zoo.training.checkpoint_averaging import average_checkpoints
from zoo.training.checkpointing import WEIGHTS_FILE
from zoo.training.files.file_store import write_atomically
from zoo.training.losses import MaskedSparseCrossEntropy, masked_accuracy
from zoo.training.optimizers import transformer_adam
from zoo.training.progress import Step
from zoo.recipes.multiprocess import check_recipe_job, run_recipe
from zoo.training.distribution import ProcessShard, barrier, is_chief, process_count
from zoo.training.run import finish_run, fit_resumably, resume, start_run
from zoo.training.text_batches import TeacherForcingBatches, filter_by_length
from zoo.training.text_data import read_multi30k, read_parallel, read_tsv_pairs
from zoo.training.tfds_data import (
    PREFIX,
    TfdsSpec,
    parse_tfds_spec,
    tfds_builder,
    tfds_translation_pairs,
)
from zoo.training.translation_metrics import TranslationMetricsCallback, corpus_scores
from zoo.generation.settings import check_search_settings
from zoo.models.translator.text_training import one_shape_per_bucket_for
from zoo.training.errors import UserError
from zoo.recipes.checks import check_fields, check_lora_settings
from zoo.recipes.settings import TranslatorRecipe
from zoo.hub.loader import load
from zoo.models.quantization import refuse_quantized_training
from zoo.models.surgery import in_run_options
from zoo.text.loading import load_tokenizer
from zoo.text.tokenizer import SubwordTokenizer
from zoo.models.translator.model import Translator

# What a run writes at the top of its output folder.
RUN_FILES = ("tokenizer.model", "checkpoints", "logs", "model.keras", "metrics.json")


def check_recipe(recipe: TranslatorRecipe) -> None:
    """Checks the settings before anything is read or written, so that a bad value fails at
    once (not at the first evaluation, hours later) in one line that names it (the ranges
    are the fields' `check` metadata, zoo/recipes/settings.py, and the search's own).

    Raises:
        ValueError: a setting out of its range.
    """
    check_fields(recipe)
    check_lora_settings(recipe)
    check_search_settings(recipe.beam_size, alpha=recipe.alpha)
    check_recipe_job(recipe, backend=keras.backend.backend())
    if recipe.tfds:
        tfds_builder(tfds_training_spec(recipe).name)


def tfds_training_spec(recipe: TranslatorRecipe) -> TfdsSpec:
    """The TFDS split `--tfds` trains on (`tfds:` is optional there)."""
    return parse_tfds_spec(recipe.tfds if recipe.tfds.startswith(PREFIX) else PREFIX + recipe.tfds)


def load_pairs(recipe: TranslatorRecipe) -> tuple[list, list]:
    """(training pairs, validation pairs) as the recipe names them."""
    if recipe.multi30k:
        train = read_multi30k(recipe.multi30k, "train", recipe.source_lang, recipe.target_lang)
        valid = read_multi30k(recipe.multi30k, "val", recipe.source_lang, recipe.target_lang)
    elif recipe.source and recipe.target:
        train = read_parallel(recipe.source, recipe.target)
        if not (recipe.validation_source and recipe.validation_target):
            raise UserError("--source/--target need --validation-source/--validation-target")
        valid = read_parallel(recipe.validation_source, recipe.validation_target)
    elif recipe.tsv:
        path, _, member = recipe.tsv.partition(":")
        pairs = read_tsv_pairs(path, member=member or None)
        order = np.random.default_rng(recipe.seed).permutation(len(pairs))
        held = min(1000, len(pairs) // 10)
        valid = [pairs[i] for i in order[:held]]
        train = [pairs[i] for i in order[held:]]
    elif recipe.tfds:
        train_spec = tfds_training_spec(recipe)
        train = tfds_translation_pairs(train_spec, recipe.source_lang, recipe.target_lang)
        valid = tfds_translation_pairs(TfdsSpec(train_spec.name, "validation"),
                                       recipe.source_lang, recipe.target_lang)
    else:
        raise UserError("no training data: give --multi30k DIR, --source/--target FILES, "
                        "--tsv FILE or --tfds NAME")
    if recipe.limit:
        train = train[:recipe.limit]
    if recipe.validation_limit:
        valid = valid[:recipe.validation_limit]
    for name, pairs in (("training", train), ("validation", valid)):
        if not pairs:  # sacreBLEU would fail on it, after a whole epoch
            raise UserError(f"the {name} data holds no sentence pairs")
    return train, valid


def _tokenizer(recipe: TranslatorRecipe, train: list,
               pretrained: Translator | None = None) -> SubwordTokenizer:
    if pretrained is not None:
        return pretrained.require_tokenizer()
    path = Path(recipe.output) / "tokenizer.model"
    if process_count() > 1:  # process 0 trains it; every process reads that one
        if is_chief() and not path.exists():
            _train_tokenizer(recipe, train, path)
        barrier("zoo-tokenizer")
        return load_tokenizer(path)
    if path.exists():  # a resumed run must keep its vocabulary
        return load_tokenizer(path)
    return _train_tokenizer(recipe, train, path)


def _train_tokenizer(recipe: TranslatorRecipe, train: list, path: Path) -> SubwordTokenizer:
    texts = [side for pair in train for side in pair]
    with Step(f"training a {recipe.vocabulary_size:,}-piece tokenizer on {len(texts):,} "
              "sentences"):
        tokenizer = SubwordTokenizer.train(texts, vocabulary_size=recipe.vocabulary_size)
    write_atomically(path, tokenizer.save)  # a kill mid-write must not spoil the resume
    return tokenizer


def build_translator(recipe: TranslatorRecipe, tokenizer: SubwordTokenizer,
                     pretrained: Translator | None = None) -> Translator:
    """The recipe's model (a new `architecture`, or `pretrained` to train further, with LoRA
    factors alone trainable where `recipe.lora_rank` is set), compiled with the paper's
    optimizer and a label-smoothed loss."""
    if pretrained is not None:
        model = in_run_options(pretrained, recipe.dropout)
        if recipe.lora_rank:
            model.enable_lora(recipe.lora_rank, recipe.lora_alpha)
    else:
        overrides: dict[str, Any] = dict(max_source_length=recipe.max_length,
                                         max_target_length=recipe.max_length)
        if recipe.dropout is not None:
            overrides["dropout"] = recipe.dropout
        model = Translator.from_architecture(recipe.architecture, tokenizer, **overrides)
    scale = recipe.learning_rate_scale
    if recipe.learning_rate is not None:
        # The paper's schedule peaks at d^-0.5 * warmup^-0.5: scale it to the asked peak.
        scale = recipe.learning_rate * (model.hidden_dim * recipe.warmup_steps) ** 0.5
    model.compile(
        optimizer=transformer_adam(model.hidden_dim, warmup_steps=recipe.warmup_steps,
                                   scale=scale, clipnorm=recipe.clipnorm),
        loss=MaskedSparseCrossEntropy(label_smoothing=recipe.label_smoothing),
        metrics=[masked_accuracy],
    )
    return model


def train_translator(recipe: TranslatorRecipe) -> dict:
    """Trains (or resumes) a translator; returns the metrics written to metrics.json. The run
    holds its output folder throughout: a second run into the folder meanwhile is refused in
    one line. With job settings it runs as one process of a multi-process job
    (`zoo.recipes.multiprocess.run_recipe`)."""
    return run_recipe(recipe, check_recipe, RUN_FILES, _train_translator)


def _train_translator(recipe: TranslatorRecipe) -> dict:
    """`train_translator` inside the held run folder."""
    out = start_run(recipe.output, RUN_FILES, recipe.force, recipe.seed, recipe.precision)
    train, valid = load_pairs(recipe)
    pretrained = load(recipe.model, expect=Translator) if recipe.model else None
    if pretrained is not None:
        refuse_quantized_training(pretrained, recipe.model)
    tokenizer = _tokenizer(recipe, train, pretrained)
    max_length = recipe.max_length
    if pretrained is not None:
        max_length = min(max_length, pretrained.max_source_length,
                         pretrained.max_target_length)

    source_ids = tokenizer.encode([s for s, _ in train], add_end=True)
    target_ids = tokenizer.encode([t for _, t in train], add_end=False, target=True)
    # Keep pairs that fit: source with its end token, target with start or end added.
    kept = filter_by_length(zip(source_ids, target_ids), max_length, max_length - 1)
    source_ids, target_ids = [s for s, _ in kept], [t for _, t in kept]
    special = dict(start_id=tokenizer.start_id, end_id=tokenizer.end_id,
                   pad_id=tokenizer.pad_id)
    model = build_translator(recipe, tokenizer, pretrained)
    # On JAX every batch of a length bucket gets one shape, as `Translator.fit` gives it.
    batches = TeacherForcingBatches(source_ids, target_ids, recipe.batch_size,
                                    seed=recipe.seed,
                                    one_shape_per_bucket=one_shape_per_bucket_for(model),
                                    **special)
    if keras.backend.backend() == "tensorflow":
        batches = batches.to_tf_dataset()
    elif process_count() > 1:  # each process feeds its rows of every global batch
        batches = ProcessShard(batches)

    sample = TeacherForcingBatches(source_ids[:2], target_ids[:2], 2, shuffle=False,
                                   **special)[0]
    model(sample[0])  # build the variables before restoring a checkpoint
    initial_epoch = resume(model, out)

    def translate(texts: list[str]) -> list[str]:
        return model.translate(texts, beam_size=recipe.beam_size, alpha=recipe.alpha)

    sources, references = [s for s, _ in valid], [t for _, t in valid]
    before = None
    if pretrained is not None and not initial_epoch:  # the baseline fine-tuning must beat
        before = evaluate_translator(model, sources, references, recipe.beam_size,
                                     recipe.alpha)
        print(f"before fine-tuning: validation BLEU {before['bleu']:.2f}")
    bleu = TranslationMetricsCallback(translate, sources, references,
                                      every=recipe.evaluate_every)
    # The last epochs stay on disk, for checkpoint averaging.
    # The batches shuffle themselves every epoch (Keras would warn that it cannot).
    history, seconds = fit_resumably(model, batches, out, recipe.epochs, initial_epoch,
                                     callbacks=[bleu], keep=max(5, recipe.average_last),
                                     shuffle=False)

    if bleu.history and bleu.history[-1]["epoch"] == recipe.epochs:
        final = {"bleu": bleu.history[-1]["bleu"], "chrf": bleu.history[-1]["chrf"]}
    else:  # the last epoch was not evaluated (or there was nothing left to train)
        final = evaluate_translator(model, sources, references, recipe.beam_size,
                                    recipe.alpha)
    averaged = _average_if_better(model, recipe, out / "checkpoints", final,
                                  lambda: evaluate_translator(model, sources, references,
                                                              recipe.beam_size, recipe.alpha))
    if averaged is not None:
        final = averaged
    extra: dict[str, Any] = {"training_pairs": len(source_ids), "validation_pairs": len(valid),
                             "validation_bleu_per_epoch": bleu.history}
    if recipe.average_last > 1:
        extra["checkpoint_averaging"] = {"last": recipe.average_last,
                                         "kept": averaged is not None}
    return finish_run(out, model, recipe, history, seconds, initial_epoch, final, before,
                      final_model=model.merge_lora() if recipe.lora_rank else None, **extra)


def _average_if_better(model: Translator, recipe: TranslatorRecipe, checkpoints: Path,
                       final: dict, evaluate: Any) -> dict | None:
    """Averages the last `recipe.average_last` epoch checkpoints into `model` and keeps the
    average when its validation BLEU is at least the last epoch's (its scores are returned);
    otherwise restores the last epoch's weights and returns None."""
    files = sorted(checkpoints.glob(f"epoch-*/{WEIGHTS_FILE}"))[-recipe.average_last:]
    if recipe.average_last <= 1 or len(files) < 2:
        return None
    last = model.get_weights()
    average_checkpoints(model, files)
    scores = evaluate()
    print(f"average of the last {len(files)} checkpoints: validation BLEU "
          f"{scores['bleu']:.2f} (last epoch {final['bleu']:.2f})")
    if scores["bleu"] >= final["bleu"]:
        return scores
    model.set_weights(last)
    return None


def evaluate_translator(model: Translator, sources: list[str], references: list[str],
                        beam_size: int = 4, alpha: float = 0.6) -> dict:
    """Translates `sources` and scores them against `references` (sacreBLEU and chrF).

    Raises:
        zoo.UserError: no sentences, or not as many references as sources.
    """
    if not sources:
        raise UserError("no sentences to evaluate: the source file is empty")
    if len(sources) != len(references):
        raise UserError(f"{len(sources)} sources but {len(references)} references; they "
                        f"must align")
    with Step(f"translating {len(sources):,} sentences (beam {beam_size})",
              total=len(sources)) as step:
        hypotheses = model.translate(sources, beam_size=beam_size, alpha=alpha,
                                     progress=step.advance)
    scores = corpus_scores(hypotheses, references)
    scores["sentences"] = len(sources)
    return scores

