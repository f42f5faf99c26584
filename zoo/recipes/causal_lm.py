"""Fine-tuning a causal language model on a text file: `zoo finetune lm`.

`finetune_causal_lm` trains a trained `CausalLM` further on the lines of a UTF-8 text file,
one example a line, with `CausalLM.fit` on the raw strings (its preprocessor tokenizes each
line, wraps it in the end-of-text token and weights padding 0), and scores the next-token
loss on held-out lines. A run writes everything into its output folder; started again with
the same command after a crash or SIGKILL, it continues from the last epoch checkpoint.

    out/checkpoints/          weights and optimizer state after every epoch
    out/logs/                 TensorBoard
    out/model.keras           the fine-tuned model (tokenizer inside; LoRA factors merged)
    out/manifest.json         its kind and sha256, so that `zoo.load(out)` takes the folder
    out/metrics.json          the settings, the per-epoch losses, the final figures

Each line trains after an end-of-text token, as a document's start, and `generate` (and
`zoo generate`, and the model's export) reads each prompt after that same token
(`CausalLMPreprocessor`'s `add_start_token`), so a plain prompt continues as the training
lines began: `zoo generate --model out "Once upon"`.
"""

from __future__ import annotations

import math
import os

import keras
import numpy as np

from zoo.hub.loader import MANIFEST, load, write_manifest
from zoo.models.causal_lm.causal_lm import CausalLM
from zoo.models.quantization import refuse_quantized_training
from zoo.recipes.checks import check_fields, check_lora_settings
from zoo.recipes.data_fit import default_validation_size
from zoo.recipes.multiprocess import recipe_job, run_recipe
from zoo.recipes.settings import CausalLMFinetuneRecipe
from zoo.training.distribution import is_chief
from zoo.training.errors import UserError
from zoo.training.losses import MaskedSparseCrossEntropy
from zoo.training.run import finish_run, fit_resumably, resume, start_run
from zoo.training.text_data import read_lines

# What a run writes at the top of its output folder.
RUN_FILES = ("checkpoints", "logs", "model.keras", MANIFEST, "metrics.json")


def read_examples(path: str | None) -> list[str]:
    """The training examples of `--data`: its non-blank lines, as they are.

    Raises:
        UserError: no `--data`, a missing file, a file that is not UTF-8 text, or one with
            no example; one line naming `--data` and the file.
        FileNotFoundError: as `zoo.training.text_data.read_lines`.
    """
    if not path:
        raise UserError("zoo finetune lm needs --data FILE.txt (one training example a line)")
    if not os.path.isfile(path):
        raise UserError(f"--data {path}: no such file")
    try:
        lines = read_lines(path)
    except UserError as error:  # not UTF-8, or a damaged gzip file
        raise UserError(f"--data {path}: {error}") from None
    examples = [line for line in lines if line.strip()]
    if not examples:
        raise UserError(f"--data {path} holds no example: every line is blank")
    return examples


def split_examples(examples: list[str], validation_size: int | None,
                   seed: int) -> tuple[list[str], list[str]]:
    """(training, validation) lines: `validation_size` lines drawn at random with `seed` (a
    tenth, at most 5,000, when None: `default_validation_size`, as the ViT recipes hold out
    images), the rest in their order.

    Raises:
        UserError: fewer than two lines, or a split that leaves no line to train on.
    """
    count = len(examples)
    if count < 2:
        raise UserError(f"--data holds {count} line(s); fine-tuning needs at least two (one "
                        "to train on, one to validate)")
    held = validation_size or default_validation_size(count)
    if held >= count:
        raise UserError(f"--validation-size {held} leaves no training line: --data holds "
                        f"{count}; give at most {count - 1}")
    chosen = set(np.random.default_rng(seed).permutation(count)[:held].tolist())
    train = [line for i, line in enumerate(examples) if i not in chosen]
    return train, [examples[i] for i in sorted(chosen)]


def check_recipe(recipe: CausalLMFinetuneRecipe) -> None:
    """Checks the settings and reads `--data` before anything is written or loaded.

    Raises:
        UserError: a setting out of its range, a missing `--model`, a setting this recipe
            does not apply (`--dropout`, mixed `--precision`, a multi-process job), or bad
            `--data` (see `read_examples`, `split_examples`).
    """
    check_fields(recipe)
    check_lora_settings(recipe)
    if not recipe.model:
        raise UserError("zoo finetune lm needs --model (a causal language model: a .keras "
                        "file, a model folder or a hub handle such as hf://gpt2)")
    if recipe.dropout is not None:
        raise UserError(f"--dropout {recipe.dropout}: zoo finetune lm trains with the "
                        "model's own dropout; leave --dropout out")
    if recipe.precision != "float32":
        raise UserError(f"--precision {recipe.precision}: zoo finetune lm trains in float32 "
                        "only; leave --precision out")
    if recipe_job(recipe).is_multi_process:
        raise UserError("zoo finetune lm runs in one process; leave out --num-processes and "
                        "the job's environment variables")
    split_examples(read_examples(recipe.data), recipe.validation_size, recipe.seed)


def load_causal_lm(name: str) -> CausalLM:
    """The `--model` to fine-tune: a `CausalLM` with its tokenizer.

    Raises:
        UserError: another kind of model (the message says which), a quantized one, or a
            model without a tokenizer; one line naming `--model`.
    """
    try:
        model = load(name, expect=CausalLM)
    except UserError as error:
        raise UserError(f"--model {name}: {error}") from None
    refuse_quantized_training(model, name)
    if model.preprocessor is None or model.preprocessor.tokenizer is None:
        raise UserError(f"--model {name} has no tokenizer: fine-tuning on text needs one")
    return model


def finetune_causal_lm(recipe: CausalLMFinetuneRecipe) -> dict:
    """Fine-tunes (or resumes fine-tuning) a causal language model on `recipe.data`; returns
    the metrics written to metrics.json. The run holds its output folder throughout: a second
    run into it meanwhile is refused in one line, and a run that fails before writing leaves
    no folder."""
    return run_recipe(recipe, check_recipe, RUN_FILES, _finetune)


def _finetune(recipe: CausalLMFinetuneRecipe) -> dict:
    """`finetune_causal_lm` inside the held run folder."""
    out = start_run(recipe.output, RUN_FILES, recipe.force, recipe.seed, recipe.precision)
    train, valid = split_examples(read_examples(recipe.data), recipe.validation_size,
                                  recipe.seed)
    model = load_causal_lm(recipe.model)
    model.preprocessor.sequence_length = min(recipe.sequence_length,
                                             model.backbone.max_positions)
    if recipe.lora_rank:
        model.enable_lora(recipe.lora_rank, recipe.lora_alpha)
    model.compile(optimizer=keras.optimizers.AdamW(recipe.learning_rate,
                                                   clipnorm=recipe.clipnorm),
                  loss=MaskedSparseCrossEntropy(label_smoothing=recipe.label_smoothing,
                                                pad_id=None))
    # Its variables made now, not while `fit` traces its step (TensorFlow would trace it
    # twice: once making them, once more without).
    model.optimizer.build(model.trainable_variables)
    validation = model.preprocessor.text_dataset(valid, recipe.batch_size)
    initial_epoch = resume(model, out)
    before = None
    if not initial_epoch:  # the baseline fine-tuning must beat
        before = _scores(model, validation)
        print(f"before fine-tuning: validation loss {before['loss']:.4f}")
    # The lines as strings: `CausalLM.fit` tokenizes them once and shuffles them every epoch.
    history, seconds = fit_resumably(model, train, out, recipe.epochs, initial_epoch,
                                     checkpoint_every=recipe.checkpoint_every,
                                     batch_size=recipe.batch_size,
                                     validation_data=validation)
    final = _scores(model, validation)
    final_model = model.merge_lora() if recipe.lora_rank else model
    metrics = finish_run(out, model, recipe, history, seconds, initial_epoch, final, before,
                         final_model=final_model, training_lines=len(train),
                         validation_lines=len(valid))
    if is_chief():
        write_manifest(out, kind="causal-lm", preset=os.path.basename(os.path.abspath(out)),
                       description=f"{recipe.model} fine-tuned on {recipe.data}")
    return metrics


def _scores(model: CausalLM, validation: object) -> dict:
    """The validation loss, its perplexity and the next-token accuracy."""
    found = model.evaluate(validation, verbose=0, return_dict=True)
    loss = float(found["loss"])
    accuracy = next((float(v) for k, v in found.items() if "accuracy" in k), None)
    return {"loss": loss, "perplexity": math.exp(min(loss, 50.0)),
            "accuracy": accuracy}
