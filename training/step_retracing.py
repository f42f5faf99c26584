"""TensorFlow's "triggered tf.function retracing" warning, unflagged where it counts new models.

TensorFlow warns when 5 of the last 10 calls of a `tf.function` traced it, and counts the
calls of every function made from one piece of Python code together. Keras builds each model's
train, test and predict step from one closure (`TensorFlowTrainer._make_function`), so a
session that fits or evaluates a few models one after another (the README's fine-tuning:
load, fit, a new model with other dropout, compile, fit) is warned of "excessive retracing"
though every model traced its own step once. Within `keras_steps_unflagged()` that one warning,
about Keras' own step functions, is dropped; every other record of the `tensorflow` logger
(the user's own functions' retracing included) passes.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator


class _KerasStepRetracing(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not ("triggered tf.function retracing" in message
                    and "TensorFlowTrainer" in message)


@contextlib.contextmanager
def keras_steps_unflagged() -> Iterator[None]:
    """Within the block, TensorFlow's retracing warning about Keras' step functions is
    dropped (see the module's doc)."""
    logger = logging.getLogger("tensorflow")
    unflag = _KerasStepRetracing()
    logger.addFilter(unflag)
    try:
        yield
    finally:
        logger.removeFilter(unflag)
