"""The settings of the training recipes: one dataclass per `zoo train` / `zoo finetune` task,
on one base (`RecipeSettings`) that holds the settings every recipe shares.

Each field is one flag of the command (zoo/cli/recipe_flags.py reads them with
`dataclasses.fields`): its type and default are the field's, its help text and choices the
field's `metadata`: "help", "choices" and "check" (a `Check` of zoo/recipes/checks.py, the
range of valid values). The command line checks each flag as it parses it ("argument
--epochs: must be a positive int; got 0"), and `check_fields` the same ranges for a recipe
made in Python. A subclass that only changes a field's default keeps the base's help. This
module imports nothing but the standard library and the ground floor, so that `zoo train vit
--help` and the flag checks run in a fraction of a second, before Keras loads; the recipes
that run the settings are zoo/recipes/translator.py and zoo/recipes/vit.py.
"""

from __future__ import annotations

import dataclasses

from zoo.recipes.checks import (DECAY, FRACTION, IMAGE_SIZE, LENGTH_PENALTY, LORA_ALPHA,
                                MAGNITUDE, MAX_LENGTH, NON_NEGATIVE, NON_NEGATIVE_INT,
                                OPEN_FRACTION, POSITIVE, POSITIVE_INT, SEED)

# The choices are zoo.training.precision.PRECISIONS, written out so that the command line reads
# them without Keras (a test keeps the two equal).
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


@dataclasses.dataclass
class RecipeSettings:
    """The settings every training recipe shares: where the run writes, what it starts from,
    the optimisation common to all, and the multi-process job it may be part of
    (zoo.training.distribution)."""

    output: str = dataclasses.field(default="runs/model", metadata={
        "help": "run folder: checkpoints, logs, the final model.keras (a stopped run resumes)"})
    model: str | None = dataclasses.field(default=None, metadata={
        "help": "start from this trained model (shipped name, .keras path or hub handle) "
                "instead of training ARCHITECTURE from scratch"})
    epochs: int = dataclasses.field(default=20, metadata={
        "check": POSITIVE_INT,
        "help": "passes over the training data"})
    batch_size: int = dataclasses.field(default=128, metadata={
        "check": POSITIVE_INT,
        "help": "examples per training step"})
    label_smoothing: float = dataclasses.field(default=0.1, metadata={
        "check": FRACTION,
        "help": "label-smoothing factor of the cross-entropy loss"})
    clipnorm: float | None = dataclasses.field(default=1.0, metadata={
        "check": POSITIVE,
        "help": "clip each gradient to this global norm ('none': no clipping)"})
    dropout: float | None = dataclasses.field(default=None, metadata={
        "check": FRACTION,
        "help": "dropout rate overriding the architecture's ('none': its own)"})
    lora_alpha: float | None = dataclasses.field(default=None, metadata={
        "check": LORA_ALPHA,
        "help": "with --lora-rank: the LoRA factors are scaled by ALPHA / R ('none': R, a "
                "scale of 1)"})
    precision: str = dataclasses.field(default="float32", metadata={
        "help": "compute precision (mixed precision keeps float32 variables)",
        "choices": PRECISIONS})
    seed: int = dataclasses.field(default=0, metadata={
        "check": SEED,
        "help": "random seed of initialisation, shuffling and augmentation"})
    force: bool = dataclasses.field(default=False, metadata={
        "help": "accept an OUTPUT folder that holds a finished run (it continues from its "
                "checkpoints) or files the run did not write"})
    coordinator_address: str | None = dataclasses.field(default=None, metadata={
        "help": "multi-process training (JAX backend): HOST:PORT of process 0, which every "
                "process of the job reaches ('none': KERAS_DISTRIBUTION_JOB_ADDRESSES or "
                "JAX_COORDINATOR_ADDRESS from the environment, else one process)"})
    num_processes: int | None = dataclasses.field(default=None, metadata={
        "check": POSITIVE_INT,
        "help": "multi-process training: the number of processes of the job, one per host "
                "(or per GPU); each trains on its share of every --batch-size batch "
                "('none': KERAS_DISTRIBUTION_NUM_PROCESSES or the cluster's own)"})
    process_id: int | None = dataclasses.field(default=None, metadata={
        "check": NON_NEGATIVE_INT,
        "help": "multi-process training: this process's index from 0; process 0 writes the "
                "checkpoints, model and metrics ('none': KERAS_DISTRIBUTION_PROCESS_ID or "
                "the cluster's own)"})
    heartbeat_timeout: int = dataclasses.field(default=60, metadata={
        "check": POSITIVE_INT,
        "help": "multi-process training: seconds without a sign of life after which a "
                "process counts as lost and the job ends (its last checkpoint kept)"})
    startup_timeout: int = dataclasses.field(default=300, metadata={
        "check": POSITIVE_INT,
        "help": "multi-process training: seconds every process waits for the whole job to "
                "start and agree on its settings; then each ends in one line"})


@dataclasses.dataclass
class TranslatorRecipe(RecipeSettings):
    """Settings of a translator training run (each is a `zoo train translator` flag, whose
    help and choices are the field's metadata).

    Data comes from one of: `multi30k` (a folder of Multi30k raw files), `source`/`target`
    (two aligned text files, with `validation_source`/`validation_target`), or `tsv` (a
    tab-separated file or a zip member `archive.zip:member`, a validation split held out), or
    `tfds` (a TensorFlow Datasets translation set, `zoo.training.tfds_data`).

    With `model` (a shipped name or a `.keras` path) the run continues training that
    translator on the new pairs, with its own tokenizer and architecture (`architecture` and
    `vocabulary_size` are then ignored; `dropout` and `precision` apply). With `lora_rank` only
    LoRA factors of its attention projections train (`Translator.enable_lora`), merged into
    the final model.
    """

    output: str = "runs/translator"
    multi30k: str | None = dataclasses.field(default=None, metadata={
        "help": "folder of the Multi30k raw files (train/val .en/.de, optionally .gz)"})
    source_lang: str = dataclasses.field(default="en", metadata={
        "help": "source language code"})
    target_lang: str = dataclasses.field(default="de", metadata={
        "help": "target language code"})
    source: str | None = dataclasses.field(default=None, metadata={
        "help": "training source sentences, one per line (with --target)"})
    target: str | None = dataclasses.field(default=None, metadata={
        "help": "training target sentences, aligned with --source"})
    validation_source: str | None = dataclasses.field(default=None, metadata={
        "help": "validation source sentences (with --source/--target)"})
    validation_target: str | None = dataclasses.field(default=None, metadata={
        "help": "validation target sentences, aligned with --validation-source"})
    tsv: str | None = dataclasses.field(default=None, metadata={
        "help": "tab-separated source/target pairs: FILE or ARCHIVE.zip:MEMBER (a validation "
                "split is held out)"})
    tfds: str | None = dataclasses.field(default=None, metadata={
        "help": "a TensorFlow Datasets translation set NAME[:SPLIT], e.g. "
                "ted_hrlr_translate/pt_to_en with --source-lang pt --target-lang en: SPLIT "
                "(train when absent) trains, its validation split validates"})
    limit: int | None = dataclasses.field(default=None, metadata={
        "check": POSITIVE_INT,
        "help": "use at most this many training pairs ('none': all)"})
    validation_limit: int | None = dataclasses.field(default=500, metadata={
        "check": POSITIVE_INT,
        "help": "score at most this many validation pairs ('none': all)"})
    architecture: str = dataclasses.field(default="transformer-multi30k", metadata={
        "help": "architecture to train from scratch (untrained shape; `zoo models` lists them)"})
    vocabulary_size: int = dataclasses.field(default=8000, metadata={
        "check": POSITIVE_INT,
        "help": "subword vocabulary size of a new tokenizer"})
    max_length: int = dataclasses.field(default=64, metadata={
        "check": MAX_LENGTH,
        "help": "longest sequence in tokens; longer pairs are cut"})
    warmup_steps: int = dataclasses.field(default=4000, metadata={
        "check": POSITIVE_INT,
        "help": "linear warm-up steps of the inverse-square-root schedule"})
    learning_rate_scale: float = dataclasses.field(default=1.0, metadata={
        "check": POSITIVE,
        "help": "factor on the paper's schedule d_model^-0.5 * min(step^-0.5, step * "
                "warmup^-1.5) (ignored with --learning-rate)"})
    learning_rate: float | None = dataclasses.field(default=None, metadata={
        "check": POSITIVE,
        "help": "peak learning rate ('none' keeps the paper's schedule)"})
    lora_rank: int | None = dataclasses.field(default=None, metadata={
        "check": POSITIVE_INT,
        "help": "with --model: train rank-R LoRA factors of the query and value projections "
                "of every attention layer instead of every weight (the final model.keras "
                "has them merged; 'none': train every weight)"})
    beam_size: int = dataclasses.field(default=4, metadata={
        "check": POSITIVE_INT,
        "help": "beam width of the validation translations"})
    alpha: float = dataclasses.field(default=0.6, metadata={
        "check": LENGTH_PENALTY,
        "help": "length-penalty exponent of beam search"})
    evaluate_every: int = dataclasses.field(default=1, metadata={
        "check": POSITIVE_INT,
        "help": "score BLEU/chrF on the validation set every N epochs"})
    average_last: int = dataclasses.field(default=1, metadata={
        "check": POSITIVE_INT,
        "help": "at the end, average the weights of the last N epoch checkpoints and keep the "
                "average if its validation BLEU is at least the last epoch's"})


@dataclasses.dataclass
class TranslatorFinetuneRecipe(TranslatorRecipe):
    """`zoo finetune translator`: continued training of a pretrained translator on new
    in-domain pairs (few epochs, a short warm-up to a small peak learning rate). A field given
    a new default here keeps the training recipe's help."""

    output: str = "runs/translator-finetune"
    model: str | None = "translator-multi30k-en-de"
    epochs: int = 5
    warmup_steps: int = 100
    learning_rate: float | None = 1e-4
    batch_size: int = 64


@dataclasses.dataclass
class ViTRecipe(RecipeSettings):
    """Settings of a ViT training run (each is a `zoo train vit` flag, whose help and choices
    are the field's metadata).

    `data` is a folder with one sub-folder of images per class, a `.tar.gz` of one (it is
    extracted into the output folder), a folder of MNIST-style IDX files such as
    Fashion-MNIST's, or a TensorFlow Datasets split `tfds:NAME[:SPLIT]`
    (`zoo.training.tfds_data`); `validation_size` images are held out from it (a
    tenth, at most 5,000, when None: `zoo.recipes.data_fit`).

    With `model` (a shipped name or a `.keras` path) the run fine-tunes that model instead of
    training `architecture` from scratch: its head is replaced when the classes differ, its position
    embeddings are interpolated when `image_size` differs, the embeddings and the first
    `freeze_blocks` blocks stay fixed, and `layer_decay` < 1 gives lower blocks smaller
    learning rates. With `lora_rank`, LoRA factors of the attention projections and the head
    train instead of every weight (`VisionTransformer.enable_lora`), merged into the final
    model.
    """

    output: str = "runs/vit"
    data: str | None = dataclasses.field(default=None, metadata={
        "help": "images: a folder with one subfolder per class, a .tar.gz of one, a folder "
                "of MNIST-style IDX files, or a TFDS dataset tfds:NAME[:SPLIT] (e.g. "
                "tfds:cifar100; split train when absent)"})
    freeze_blocks: int = dataclasses.field(default=0, metadata={
        "check": NON_NEGATIVE_INT,
        "help": "with --model: keep the embeddings and the first N blocks fixed"})
    layer_decay: float = dataclasses.field(default=1.0, metadata={
        "check": DECAY,
        "help": "layer-wise learning-rate decay (1: none; lower blocks learn slower)"})
    lora_rank: int | None = dataclasses.field(default=None, metadata={
        "check": POSITIVE_INT,
        "help": "with --model: train rank-R LoRA factors of every block's query and value "
                "projections, and the head, instead of every weight (the final model.keras "
                "has them merged; 'none': train every weight)"})
    validation_size: int | None = dataclasses.field(default=None, metadata={
        "check": POSITIVE_INT,
        "help": "images held out for validation ('none', the default: a tenth of the data, "
                "at most 5000)"})
    limit_per_class: int | None = dataclasses.field(default=None, metadata={
        "check": POSITIVE_INT,
        "help": "use at most this many images per class ('none': all)"})
    architecture: str = dataclasses.field(default="vit-cifar-small", metadata={
        "help": "architecture to train from scratch (untrained shape; `zoo models` lists them)"})
    image_size: int = dataclasses.field(default=32, metadata={
        "check": IMAGE_SIZE,
        "help": "side of the square images the model sees (images are resized)"})
    epochs: int = 200
    # 1e-3 (the 6.3M-parameter CIFAR ViT's published rate, with Adam) collapsed this recipe's
    # vit-cifar-small to ~30% within 10 epochs, in bfloat16 and float32 alike; 3e-4 trained it
    # to 77.1% in 200 epochs (docs/training-runs.md, GPU runs of 2026-11-25).
    learning_rate: float = dataclasses.field(default=3e-4, metadata={
        "check": POSITIVE,
        "help": "peak learning rate"})
    weight_decay: float = dataclasses.field(default=0.05, metadata={
        "check": NON_NEGATIVE,
        "help": "AdamW weight decay (not applied to norms and biases)"})
    warmup_epochs: int = dataclasses.field(default=5, metadata={
        "check": NON_NEGATIVE_INT,
        "help": "linear warm-up epochs before the cosine decay"})
    ema_momentum: float | None = dataclasses.field(default=None, metadata={
        "check": OPEN_FRACTION,
        "help": "keep an exponential moving average of the weights with this momentum per "
                "step (e.g. 0.999): validation scores it and the final model is it ('none': "
                "no average; set it when a run starts)"})
    augment: bool = dataclasses.field(default=True, metadata={
        "help": "random crop and flip"})
    rand_augment: bool = dataclasses.field(default=True, metadata={
        "help": "RandAugment on top of --augment"})
    rand_augment_magnitude: float = dataclasses.field(default=0.9, metadata={
        "check": MAGNITUDE,
        "help": "RandAugment strength in [0, 1], the paper's M / 10 (DeiT: 0.9; short runs "
                "on small data often do better with 0.5)"})
    rand_augment_ops: int = dataclasses.field(default=2, metadata={
        "check": POSITIVE_INT,
        "help": "RandAugment operations per image (the paper's N)"})
    mix: str = dataclasses.field(default="none", metadata={
        "help": "batch mixing of images and labels", "choices": ("none", "mixup", "cutmix")})
    random_erasing: float = dataclasses.field(default=0.0, metadata={
        "check": FRACTION,
        "help": "with --augment: the probability that a training image has a random box "
                "replaced by noise (random erasing; 0: none)"})
    validate_every: int = dataclasses.field(default=1, metadata={
        "check": POSITIVE_INT,
        "help": "score the validation images every N epochs (and after the last)"})
    checkpoint_every: int = dataclasses.field(default=1, metadata={
        "check": POSITIVE_INT,
        "help": "write a checkpoint every N epochs and after the last (a stopped run repeats "
                "the epochs since its last checkpoint); short epochs on a GPU spend less time "
                "writing with 10"})
    data_placement: str = dataclasses.field(default="host", metadata={
        "help": "where training batches are made: 'host' (gathered and augmented per step "
                "outside the model) or 'device' (the training set held on the accelerator "
                "as uint8 once; batches drawn, augmented and mixed inside the compiled train "
                "step; every epoch has N // BATCH_SIZE full steps)",
        "choices": ("host", "device")})
    query_key_norm: bool = dataclasses.field(default=False, metadata={
        "help": "LayerNorm on every head's queries and keys (ViT-22B): keeps attention from "
                "collapsing at a high learning rate (a new model only)"})
    initialization: str = dataclasses.field(default="keras", metadata={
        "help": "a new model's first weights: Keras' (Glorot kernels, zero biases and head) or "
                "PyTorch's defaults (U(+-1/sqrt(fan_in)) kernels and biases, N(0, 1) position "
                "table and class token), as the published CIFAR recipes (a new model only)",
        "choices": ("keras", "pytorch")})


@dataclasses.dataclass
class ViTFinetuneRecipe(ViTRecipe):
    """`zoo finetune vit`: the recipe with fine-tuning defaults (a pretrained model, few
    epochs, a short warm-up, layer-wise decay, no RandAugment). Its learning rate is set here
    too, so that it stays 3e-4 whatever the training recipe's default becomes. A field given a
    new default here keeps the training recipe's help."""

    output: str = "runs/vit-finetune"
    model: str | None = "vit-cifar10"
    layer_decay: float = 0.75
    epochs: int = 5
    learning_rate: float = 3e-4
    warmup_epochs: int = 1
    rand_augment: bool = False
    batch_size: int | None = dataclasses.field(default=None, metadata={
        "check": POSITIVE_INT,
        "help": "examples per training step (default: from the data, 8 to 128 so that an "
                "epoch takes at least 8 steps: zoo.recipes.data_fit.finetune_batch_size)"})


@dataclasses.dataclass
class CausalLMFinetuneRecipe(RecipeSettings):
    """`zoo finetune lm`: a trained causal language model (`zoo.CausalLM`) trained further on
    a plain-text file, one example a line, with the model's own tokenizer (each flag is a
    field; its help and range are the field's metadata). A tenth of the lines (at most 5,000;
    `zoo.recipes.data_fit.default_validation_size`) is held out to score the loss on; with
    `lora_rank` only LoRA factors of the attention projections train
    (`CausalLM.enable_lora`), merged into the final model.
    """

    output: str = "runs/lm-finetune"
    model: str | None = dataclasses.field(default=None, metadata={
        "help": "the causal language model to fine-tune (required): a .keras file or model "
                "folder, or a hub handle such as hf://gpt2"})
    data: str | None = dataclasses.field(default=None, metadata={
        "help": "a UTF-8 text file with one training example per line: the model learns to "
                "write lines like it, each line a text on its own, begun and ended by the "
                "end-of-text token (blank lines are skipped; no line spans two examples)"})
    epochs: int = 3
    batch_size: int = 8
    label_smoothing: float = 0.0
    learning_rate: float = dataclasses.field(default=5e-5, metadata={
        "check": POSITIVE,
        "help": "the AdamW learning rate (constant)"})
    sequence_length: int = dataclasses.field(default=128, metadata={
        "check": MAX_LENGTH,
        "help": "longest example in tokens, its end-of-text tokens included; longer lines "
                "are cut (at most the model's positions)"})
    validation_size: int | None = dataclasses.field(default=None, metadata={
        "check": POSITIVE_INT,
        "help": "lines held out to score the loss on ('none', the default: a tenth of the "
                "lines, at most 5000)"})
    lora_rank: int | None = dataclasses.field(default=None, metadata={
        "check": POSITIVE_INT,
        "help": "train rank-R LoRA factors of every block's attention projections instead of "
                "every weight (the final model.keras has them merged; 'none': train every "
                "weight)"})
    checkpoint_every: int = dataclasses.field(default=1, metadata={
        "check": POSITIVE_INT,
        "help": "write a checkpoint every N epochs and after the last (a stopped run "
                "resumes from the last one)"})
