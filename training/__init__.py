"""Installs as `zoo.training` (never a top-level `training`): the generic training kit.

Data pipelines, schedules, losses, optimizers, callbacks, precision and distribution set-up.
TensorFlow is imported lazily, inside the functions that build `tf.data` pipelines, so the kit
works on the JAX backend without TensorFlow; and the names below load their module (and Keras)
on first use, so `import zoo.training` is cheap. The file plumbing it uses (the cache folder,
atomic writes, the run lock, archives) is `zoo.training.files`."""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it; imported on first access (PEP 562).
_LAZY = {
    "DeviceResidentTraining": "zoo.training.device_resident",
    "InverseSqrtWarmup": "zoo.training.schedules",
    "MaskedAccuracy": "zoo.training.losses",
    "MaskedSparseCrossEntropy": "zoo.training.losses",
    "MixBatch": "zoo.training.augmentation",
    "PreciseBatchNorm": "zoo.training.batch_norm",
    "RandAugmentPolicy": "zoo.training.rand_augment",
    "RandomCropWithPadding": "zoo.training.augmentation",
    "RandomErasing": "zoo.training.augmentation",
    "ResumableCheckpoint": "zoo.training.checkpointing",
    "SelectiveDecayAdamW": "zoo.training.optimizers",
    "TeacherForcingBatches": "zoo.training.text_batches",
    "WarmupCosine": "zoo.training.schedules",
    "adamw_no_decay_on_norms": "zoo.training.optimizers",
    "cifar_augmentation": "zoo.training.augmentation",
    "compiled_augmentation": "zoo.training.augmentation",
    "data_parallel_scope": "zoo.training.distribution",
    "describe_devices": "zoo.training.distribution",
    "filter_by_length": "zoo.training.text_batches",
    "hold_run_folder": "zoo.training.run",
    "image_folder_tf_dataset": "zoo.training.image_data",
    "latest_checkpoint": "zoo.training.checkpointing",
    "load_image": "zoo.training.image_files",
    "load_image_folder_numpy": "zoo.training.image_data",
    "make_teacher_forcing_batch": "zoo.training.text_batches",
    "masked_accuracy": "zoo.training.losses",
    "read_lines": "zoo.training.text_data",
    "recompute_batch_norm_statistics": "zoo.training.batch_norm",
    "read_multi30k": "zoo.training.text_data",
    "read_parallel": "zoo.training.text_data",
    "read_tsv_pairs": "zoo.training.text_data",
    "relative_variable_path": "zoo.training.optimizers",
    "restore_latest": "zoo.training.checkpointing",
    "scan_image_folder": "zoo.training.image_files",
    "set_precision": "zoo.training.precision",
    "setup_data_parallel": "zoo.training.distribution",
    "parse_tfds_spec": "zoo.training.tfds_data",
    "tfds_image_arrays": "zoo.training.tfds_data",
    "tfds_image_dataset": "zoo.training.tfds_data",
    "tfds_translation_pairs": "zoo.training.tfds_data",
    "train_validation_split": "zoo.training.image_data",
    "transformer_adam": "zoo.training.optimizers",
    "wrap_optimizer_for_precision": "zoo.training.precision",
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
