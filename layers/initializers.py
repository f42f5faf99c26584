"""Initializer handling shared by the layers."""

from __future__ import annotations

from typing import Any

import keras


def clone_initializer(initializer: Any) -> Any:
    """A fresh copy of a Keras initializer, so that sub-layers do not share a seed."""
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())
