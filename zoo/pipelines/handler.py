"""A Beam `ModelHandler` over a signature of a zoo export: bytes in, one result an element.

Why not Beam's own `TFModelHandlerTensor`: it loads a model with `tf.keras.models.load_model`
through `tensorflow_hub`, which Keras 3 cannot do for a SavedModel (Keras 3 loads `.keras`
files; a SavedModel is for `keras.layers.TFSMLayer` or `tf.saved_model.load`), and it feeds
the model one stacked numeric tensor, while the zoo's exports take a `tf.string` batch
(sentences, or encoded images) and do their tokenization, search and image decoding in the
graph. This handler loads the export with `tf.saved_model.load` (after `tensorflow_text`, whose
ops the translator's graph holds), so a pipeline runs the very graph TF Serving runs.

A batch that the graph refuses (a corrupt image, an image above the export's pixel limit) is
run again one element at a time, so that only the bad element fails: its result is a
`Failure` with the first line of TensorFlow's message, and the rest of its batch is answered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from zoo.serving.text_endpoints import MAX_SENTENCES


@dataclasses.dataclass(frozen=True)
class Failure:
    """The result of an element that could not be read or run; `message` says why."""

    message: str


def first_line(error: BaseException) -> str:
    """The line of an error's message that says what went wrong. A TensorFlow function's
    error opens with `Graph execution error:`, `Detected at node ...` and the stack of the
    op's definition (indented lines, or `<stack traces unavailable>` for a loaded
    SavedModel) before the op's own message, and ends with the node."""
    text = getattr(error, "message", None) or str(error) or type(error).__name__
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    said = [line for line in lines if not line[0].isspace() and not line.startswith(
        ("Graph execution error", "Detected at node", "<stack traces unavailable>"))]
    return (said or lines)[0]


class ExportHandler(ModelHandler[bytes, PredictionResult, Any]):
    """Runs one signature of a zoo export (`zoo export`) on batches of `bytes` elements.

    Args:
        export_dir: the export's version folder (`DIR/NAME/VERSION`, holding
            `saved_model.pb`); a path any Beam file system reads (local or remote).
        input_name: the signature's one input (`sentences` for a translator, `images` for a
            ViT).
        signature: the signature to run.
        batch_size: the most elements a call runs together (at most `MAX_SENTENCES`, the
            most a text export accepts in one request).

    Each result's `inference` is a dict of the signature's outputs for that element (numpy
    values, strings as `bytes`), or a `Failure`.

    Example:
        handler = ExportHandler("exports/translator/1", "sentences")
        results = lines | RunInference(KeyedModelHandler(handler))
    """

    def __init__(self, export_dir: str, input_name: str,
                 signature: str = "serving_default", batch_size: int = 32) -> None:
        if not 1 <= batch_size <= MAX_SENTENCES:
            raise ValueError(f"batch_size must be 1 to {MAX_SENTENCES}; got {batch_size!r}")
        super().__init__(min_batch_size=1, max_batch_size=batch_size)
        self.export_dir = export_dir
        self.input_name = input_name
        self.signature = signature
        self.batch_size = batch_size

    def load_model(self) -> Any:
        """The export's signature, loaded once a worker (Beam shares it between threads)."""
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the ops of the translator's graph)

        return tf.saved_model.load(self.export_dir).signatures[self.signature]

    def run_inference(self, batch: Sequence[bytes], model: Any,
                      inference_args: dict[str, Any] | None = None
                      ) -> Iterable[PredictionResult]:
        """One `PredictionResult` an element of `batch`, in its order; a batch the graph
        refuses is run again element by element, so that only the bad ones fail."""
        import tensorflow as tf

        try:
            return self._results(batch, model)
        except tf.errors.OpError as error:
            if len(batch) == 1:
                return [PredictionResult(batch[0], Failure(first_line(error)))]
        results = []
        for element in batch:
            try:
                results.extend(self._results([element], model))
            except tf.errors.OpError as error:
                results.append(PredictionResult(element, Failure(first_line(error))))
        return results

    def _results(self, batch: Sequence[bytes], model: Any) -> list[PredictionResult]:
        import tensorflow as tf

        outputs = model(**{self.input_name: tf.constant(list(batch), tf.string)})
        arrays = {name: np.asarray(value) for name, value in outputs.items()}
        return [PredictionResult(element, {name: array[i] for name, array in arrays.items()})
                for i, element in enumerate(batch)]

    def get_metrics_namespace(self) -> str:
        """Beam's metrics for this handler are named under `zoo_export`."""
        return "zoo_export"
