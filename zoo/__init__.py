"""The attention zoo: a Transformer translator and a Vision Transformer, with their recipes.

    import zoo
    translator = zoo.load("translator-multi30k-en-de")
    translator.translate(["A man is riding a bicycle."])
"""

import os

# Quiet TensorFlow's C++ start-up logging for the `zoo` command and library users alike
# (set before Keras imports TensorFlow; an explicit setting wins).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from zoo.registry import list_models, load, load_weights  # noqa: E402

__all__ = ["list_models", "load", "load_weights"]
