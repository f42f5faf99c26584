"""A SavedModel run as the stock TensorFlow Serving runs it, in this process.

The model server loads a SavedModel into a TF1 session (not through `tf.saved_model.load`),
replays its warm-up records, and runs each request by the signature's tensor names, with XLA's
CPU JIT off unless started with an experimental flag. `ServedModel` does the same, XLA off while
it runs, so that an export can be tried, and timed (`zoo bench --work mt-served`), as it will
be served, without a server: a graph that needs XLA fails here as it would there.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

from zoo.serving.server_messages import message_class

SIGNATURE = "serving_default"


def set_xla_compilation(enabled: bool) -> None:
    """Switches XLA compilation on or off for this process, as the model server does at
    start-up (`tensorflow::DisableXlaCompilation`); a function that needs XLA then fails with
    "XLA compilation disabled"."""
    import tensorflow as tf

    library = ctypes.CDLL(os.path.join(os.path.dirname(tf.__file__), "libtensorflow_cc.so.2"))
    if enabled:
        library._ZN10tensorflow20EnableXlaCompilationEv()
    else:
        library._ZN10tensorflow21DisableXlaCompilationEv()


class ServedModel:
    """A SavedModel loaded into a TF1 session, its warm-up records replayed, run with XLA
    compilation off as the model server runs it.

    XLA's switch is the process's: it is off while the warm-up and each call run, and on again
    (TensorFlow's default) after them, so the rest of the program is left as it was.

    Args:
        export_dir: a version folder that `zoo export` wrote (or any SavedModel).
        replay_warmup: run the requests of `assets.extra/tf_serving_warmup_requests`, as
            the server does with `--enable_model_warmup`, before the first call.
        xla: leave XLA compilation on (a server started with its experimental XLA flag).

    Example: `ServedModel("serving/translator/1")(sentences=["A dog runs."])["translations"]`.
    """

    def __init__(self, export_dir: str | os.PathLike, replay_warmup: bool = True,
                 xla: bool = False) -> None:
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 (registers the ops a translator's graph holds)

        self.export_dir = Path(export_dir)
        self.xla = xla
        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph)
        meta_graph = tf.compat.v1.saved_model.loader.load(
            self.session, ["serve"], str(self.export_dir))
        self.signatures = dict(meta_graph.signature_def)
        self.warmup_requests = self._replay_warmup() if replay_warmup else 0

    def __call__(self, signature: str = SIGNATURE, **inputs: Any) -> dict[str, Any]:
        """The signature's outputs (NumPy arrays) for `inputs`, fed by tensor name."""
        import numpy as np

        definition = self.signatures[signature]
        fetches = {key: value.name for key, value in definition.outputs.items()}
        import tensorflow as tf

        # An input the request leaves out takes the signature's default, as the server does.
        inputs = {**{key: tf.make_ndarray(value) for key, value in definition.defaults.items()},
                  **inputs}
        feeds = {}
        for key, value in inputs.items():
            if isinstance(value, (list, tuple)) and value and isinstance(value[0], str):
                value = np.array([v.encode() for v in value], dtype=object)
            feeds[definition.inputs[key].name] = value
        if self.xla:
            return self.session.run(fetches, feeds)
        set_xla_compilation(False)
        try:
            return self.session.run(fetches, feeds)
        finally:
            set_xla_compilation(True)

    def _replay_warmup(self) -> int:
        import tensorflow as tf

        path = self.export_dir / "assets.extra" / "tf_serving_warmup_requests"
        if not path.exists():
            return 0
        count = 0
        for record in tf.compat.v1.io.tf_record_iterator(str(path)):
            request = message_class("PredictionLog").FromString(record).predict_log.request
            self(request.model_spec.signature_name or SIGNATURE,
                 **{key: tf.make_ndarray(value) for key, value in request.inputs.items()})
            count += 1
        return count
