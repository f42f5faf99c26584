"""The attention zoo: a Transformer translator and a Vision Transformer, with their recipes.

    import zoo
    translator = zoo.load("translator-multi30k-en-de")
    translator.translate(["A man is riding a bicycle."])
"""

from zoo.registry import list_models, load

__all__ = ["list_models", "load"]
