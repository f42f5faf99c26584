"""The three parts of every model family: a backbone, a task and a preprocessor.

As keras-hub's `models/<family>/`:

    raw inputs --Preprocessor--> backbone inputs --Backbone--> features --Task's head--> outputs

- A `Backbone` maps its inputs (token ids, pixels) to features, with no head and no
  preprocessing. A network exists once and is shared: the ViT backbone is the image
  classifier's network, CLIP's image tower and the captioner's encoder; the GPT-2 decoder is the
  causal language model's network and the captioner's text half.
- A `Preprocessor` turns raw inputs (strings, image bytes, 0..255 pixel arrays) into a
  backbone's inputs with TensorFlow ops, so that one object serves the task's methods, `fit` on
  raw inputs and the exported graph.
- A `Task` holds a backbone (and a preprocessor where it has one), adds the head, and carries
  the user-facing methods (`translate`, `classify`, `generate`, `zero_shot`, `caption`).

Each family's sub-package under `zoo/models/` defines its own three classes on these bases and
registers its architectures (`zoo.models.architectures`) beside them.
"""

from __future__ import annotations

from typing import Any

import keras

from zoo.layers.xla_fusion import keras_step
from zoo.models.architectures import architecture_config, architectures, load_preset
from zoo.models.lora import LoraAdaptation
from zoo.training.step_retracing import keras_steps_unflagged


class Backbone(keras.Model):
    """A network that maps its inputs to features: no head, no preprocessing.

    A subclass stores every constructor argument as a public attribute and returns exactly
    those from `get_config`, so that `cls(**backbone.get_config())` rebuilds it; a task that
    holds the backbone saves it as a nested object of its own config.
    """

    @classmethod
    def from_architecture(cls, name: str, **overrides: Any) -> "Backbone":
        """A freshly initialised (untrained) backbone of a registered architecture of `cls`.

        Args:
            name: an architecture registered for `cls` (`zoo models` lists them).
            **overrides: constructor arguments that replace the architecture's.
        """
        return cls(**architecture_config(cls, name, overrides))

    @classmethod
    def architectures(cls) -> list[str]:
        """The names `from_architecture` accepts."""
        return list(architectures(cls.__name__))


class Preprocessor(keras.layers.Layer):
    """Raw inputs to a backbone's inputs, with TensorFlow ops (`tf.data`, exported graphs).

    A subclass holds its tokenizer or image converter and returns exactly its constructor's
    arguments from `get_config`; it runs eagerly, inside `tf.data.Dataset.map` and inside a
    `tf.function` that an export writes.
    """


class Task(LoraAdaptation, keras.Model):
    """A backbone with a head and the user-facing methods of one kind of model.

    Every task comes ready to train: one never compiled is compiled on its first `fit` or
    `evaluate` with `default_compile_arguments()` (when the task has them; a model you compiled
    yourself keeps your choice). A task whose backbone is made of Transformer blocks takes
    LoRA (`enable_lora`, `merge_lora`: `zoo.models.lora`) by naming them in `_lora_blocks`.

    Attributes:
        backbone: the `Backbone` the task computes its features with.
        preprocessor: the `Preprocessor` its methods, `fit` on raw inputs and its exports use
            (None for a task that takes the backbone's inputs only).
    """

    backbone: Backbone
    preprocessor: Preprocessor | None = None
    # The constructor arguments that are Keras objects (the backbone, the preprocessor), saved
    # as nested objects of the task's config under their own names (None stays None). Empty:
    # a task saved by its plain constructor arguments (it builds its backbone from them).
    _serialised_parts: tuple[str, ...] = ()

    def get_config(self) -> dict:
        config = super().get_config()
        for name in self._serialised_parts:
            part = getattr(self, name)
            config[name] = None if part is None else keras.saving.serialize_keras_object(part)
        return config

    @classmethod
    def from_config(cls, config: dict) -> "Task":
        if not cls._serialised_parts:
            return super().from_config(config)
        config = dict(config)
        for name in cls._serialised_parts:
            if config.get(name) is not None:
                config[name] = keras.saving.deserialize_keras_object(config[name])
        return cls(**config)

    def ensure_built(self) -> None:
        """Builds the backbone's weights, before any call (conversion, generation); a task
        with weights of its own builds them in its constructor or overrides this."""
        if not self.backbone.built:
            self.backbone.build()
        if not self.built:  # through Keras' build, which records it: a saved task loads built
            self.build()

    def _lora_blank_copy(self) -> keras.Model:
        """A model of the same config (`zoo.models.lora`); of a task saved by its parts,
        built and with the preprocessor's tokenizer, which the config does not hold."""
        if not self._serialised_parts:
            return super()._lora_blank_copy()
        model = type(self).from_config(self.get_config())
        if self.preprocessor is not None:
            model.preprocessor.tokenizer = self.preprocessor.tokenizer
        model.ensure_built()
        return model

    def default_compile_arguments(self) -> dict | None:
        """The `compile` arguments of a task fitted before it was compiled; None: compile
        it yourself."""
        return None

    def _compile_if_needed(self) -> None:
        arguments = None if self.compiled else self.default_compile_arguments()
        if arguments is not None:
            self.compile(**arguments)

    def predict_step(self, *args: Any) -> Any:
        """Keras' `predict_step` (`(data)` on TensorFlow, `(state, data)` on JAX), with the
        elementwise chains fused on TensorFlow (`zoo.layers.xla_fusion`; no export traces
        this step)."""
        with keras_step():
            return super().predict_step(*args)

    def test_step(self, *args: Any) -> Any:
        """Keras' `test_step`, fused as `predict_step` is."""
        with keras_step():
            return super().test_step(*args)

    def fit(self, *args: Any, **kwargs: Any) -> keras.callbacks.History:
        """`keras.Model.fit`, compiling first with `default_compile_arguments` a task that
        was never compiled."""
        self._compile_if_needed()
        with keras_steps_unflagged():  # a second model's step is no retracing
            return super().fit(*args, **kwargs)

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        """`keras.Model.evaluate`, compiling first as `fit` does."""
        self._compile_if_needed()
        with keras_steps_unflagged():
            return super().evaluate(*args, **kwargs)

    def pre_split_layers(self) -> list[tuple[str, Any]]:
        """The task's layers under the attribute names that files saved before the
        backbone/task split hold them by (`zoo.models.pre_split_files`); [] for a task
        that has no such files."""
        return []

    @classmethod
    def from_preset(cls, name: str, **kwargs: Any) -> "Task":
        """A trained model: a shipped name, a model file or folder, a URL or a hub handle.

        As in keras-hub, a preset means trained weights; an untrained shape is built by
        `from_architecture`. `kwargs` are what the task's loader takes (a classifier's
        `num_classes` and `class_names`).
        """
        return load_preset(cls, name, **kwargs)

    @classmethod
    def architectures(cls) -> list[str]:
        """The names `from_architecture` accepts."""
        return list(architectures(cls.__name__))
