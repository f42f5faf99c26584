"""The registry: listing shipped models without Keras, and loading models from URLs."""

from __future__ import annotations

import subprocess
import sys


def test_list_models_imports_neither_keras_nor_tensorflow() -> None:
    code = ("import sys, zoo.registry\n"
            "assert zoo.registry.list_models()\n"
            "print('tensorflow' in sys.modules, 'keras' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.split() == ["False", "False"]
