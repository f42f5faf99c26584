"""The generic training kit: data pipelines, schedules, losses, optimizers, callbacks,
precision and distribution set-up. TensorFlow is imported lazily, inside the functions that
build `tf.data` pipelines, so the kit works on the JAX backend without TensorFlow; and the
names below load their module (and Keras) on first use, so `training.file_store` and
`training.archives` serve `zoo models` without loading Keras."""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it; imported on first access (PEP 562).
_LAZY = {
    "InverseSqrtWarmup": "training.schedules",
    "MaskedAccuracy": "training.losses",
    "MaskedSparseCrossEntropy": "training.losses",
    "MixBatch": "training.augmentation",
    "RandAugmentPolicy": "training.rand_augment",
    "RandomCropWithPadding": "training.augmentation",
    "ResumableCheckpoint": "training.checkpointing",
    "SelectiveDecayAdamW": "training.optimizers",
    "TeacherForcingBatches": "training.text_batches",
    "WarmupCosine": "training.schedules",
    "adamw_no_decay_on_norms": "training.optimizers",
    "cifar_augmentation": "training.augmentation",
    "compiled_augmentation": "training.augmentation",
    "data_parallel_scope": "training.distribution",
    "describe_devices": "training.distribution",
    "extract_archive": "training.archives",
    "filter_by_length": "training.text_batches",
    "image_folder_tf_dataset": "training.image_data",
    "latest_checkpoint": "training.checkpointing",
    "load_image": "training.image_files",
    "load_image_folder_numpy": "training.image_data",
    "make_teacher_forcing_batch": "training.text_batches",
    "masked_accuracy": "training.losses",
    "read_lines": "training.text_data",
    "read_multi30k": "training.text_data",
    "read_parallel": "training.text_data",
    "read_tsv_pairs": "training.text_data",
    "relative_variable_path": "training.optimizers",
    "restore_latest": "training.checkpointing",
    "scan_image_folder": "training.image_files",
    "set_precision": "training.precision",
    "setup_data_parallel": "training.distribution",
    "tfds_image_dataset": "training.image_data",
    "train_validation_split": "training.image_data",
    "transformer_adam": "training.optimizers",
    "wrap_optimizer_for_precision": "training.precision",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
