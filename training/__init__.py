"""The generic training kit: data pipelines, schedules, losses, optimizers, callbacks,
precision and distribution set-up. TensorFlow is imported lazily, inside the functions that
build `tf.data` pipelines, so the kit works on the JAX backend without TensorFlow."""

from training.augmentation import (
    MixBatch,
    RandomCropWithPadding,
    cifar_augmentation,
    compiled_augmentation,
)
from training.checkpointing import ResumableCheckpoint, latest_checkpoint, restore_latest
from training.distribution import data_parallel_scope, describe_devices, setup_data_parallel
from training.image_data import (
    extract_archive,
    image_folder_tf_dataset,
    load_image,
    load_image_folder_numpy,
    scan_image_folder,
    tfds_image_dataset,
    train_validation_split,
)
from training.losses import MaskedAccuracy, MaskedSparseCrossEntropy, masked_accuracy
from training.optimizers import (
    SelectiveDecayAdamW,
    adamw_no_decay_on_norms,
    relative_variable_path,
    transformer_adam,
)
from training.precision import set_precision, wrap_optimizer_for_precision
from training.rand_augment import RandAugmentPolicy
from training.schedules import InverseSqrtWarmup, WarmupCosine
from training.text_batches import (
    TeacherForcingBatches,
    filter_by_length,
    make_numpy_batches,
    make_teacher_forcing_batch,
    make_tf_dataset,
)
from training.text_data import read_lines, read_multi30k, read_parallel, read_tsv_pairs
