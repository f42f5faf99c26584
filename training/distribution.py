"""Data-parallel training over all local accelerators (JAX and TensorFlow), and over the
processes of a multi-process job, one or more per host (JAX).

Data parallelism keeps a copy of the weights on every device, splits each batch between the
devices and averages the gradients, so one step on N devices gives the same weights as the
same step on one device (up to the order of floating-point additions).

- JAX: `keras.distribution.DataParallel` over the local devices; set globally with
  `setup_data_parallel()`, or for a block of code with `data_parallel_scope()`.
- TensorFlow: a `tf.distribute.MirroredStrategy`; variables must be created inside its
  scope, so build and compile the model inside `data_parallel_scope()`.

The batch size given to `fit` is the global batch size; it must be divisible by the number of
devices. Typical use, the same on both backends:

    with data_parallel_scope():
        model = build_model()
        model.compile(optimizer=..., loss=...)
        model.fit(dataset, epochs=...)

More than one process (so more than one host) is the JAX backend's: `join_job` runs
`jax.distributed.initialize` (gloo collectives on CPUs) and sets a `DataParallel` over every
device of the job; each process feeds its rows of every global batch (`ProcessShard`) and
Keras' JAX trainer assembles the global batch from them. Why not Keras' own pieces:
`keras.distribution.initialize` takes no heartbeat timeout (a lost process should end the
job in seconds, not minutes) and its `distribute_dataset` shards `tf.data` only, while the
recipes feed numpy batches. TensorFlow's `MultiWorkerMirroredStrategy` does not run Keras 3's
`fit` (keras-team/keras#20585), so `check_job_settings` refuses a job on other backends.

    job = job_settings("10.0.0.1:1234", num_processes=2, process_id=0)  # on host 0
    join_job(job)
    model.fit(ProcessShard(global_batches), epochs=...)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from typing import Any, Iterator, Mapping, Sequence

import keras
import numpy as np

from zoo.training.errors import UserError
from zoo.training.job_startup import agree_on_settings, check_address, within
from zoo.training.job_stop import hand_ctrl_c_to_the_job


def _tf_devices() -> list[str]:
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    return [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]


def describe_devices() -> str:
    """A one-line description of the backend and the devices data parallelism would use.

    Returns:
        For example "jax: 2 devices (cpu:0, cpu:1)".
    """
    backend = keras.backend.backend()
    if backend == "jax":
        devices = keras.distribution.list_devices()
    elif backend == "tensorflow":
        devices = _tf_devices()
    else:
        try:
            devices = [str(d) for d in keras.distribution.list_devices()]
        except Exception:  # a backend without Keras' distribution support
            devices = []
    noun = "device" if len(devices) == 1 else "devices"
    return f"{backend}: {len(devices)} {noun} ({', '.join(devices)})"


def setup_data_parallel(devices: Sequence[str] | None = None) -> Any:
    """Sets up data parallelism over `devices` (all local accelerators by default).

    On JAX this sets Keras' global distribution, which every model created and trained
    afterwards uses. On TensorFlow it returns a `tf.distribute.MirroredStrategy`: create and
    compile the model inside `strategy.scope()`. Other backends get a warning and None.

    Args:
        devices: Device names, e.g. ["gpu:0", "gpu:1"] on JAX or ["/gpu:0", "/gpu:1"] on
            TensorFlow; None takes every GPU (or every CPU device when there is no GPU).

    Returns:
        The `keras.distribution.DataParallel` (JAX), the `MirroredStrategy` (TensorFlow),
        or None.
    """
    backend = keras.backend.backend()
    if backend == "jax":
        distribution = _jax_data_parallel(devices)
        keras.distribution.set_distribution(distribution)
        return distribution
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.distribute.MirroredStrategy(devices=list(devices or _tf_devices()))
    warnings.warn(
        f"data parallelism is not set up on the {backend!r} backend; training uses one device",
        stacklevel=2,
    )
    return None


def _jax_data_parallel(devices: Sequence[str] | None) -> Any:
    devices = list(devices or keras.distribution.list_devices())
    if not devices:
        raise ValueError("no devices to distribute over; got an empty device list")
    return keras.distribution.DataParallel(devices=devices)


@contextlib.contextmanager
def data_parallel_scope(devices: Sequence[str] | None = None) -> Iterator[Any]:
    """A `with` block in which models are created, compiled and trained data-parallel.

    Unlike `setup_data_parallel` on JAX, the distribution is only in force inside the block
    (and restored on exit). On JAX, `fit` and `predict` shard their batches according to the
    distribution in force when they run, so call them inside the block too.

    Args:
        devices: As for `setup_data_parallel`.

    Yields:
        The `keras.distribution.DataParallel` (JAX), the `MirroredStrategy` (TensorFlow), or
        None on other backends.

    Example (on every device this machine has; one CPU is a "distribution" of one):
        >>> import numpy as np
        >>> with data_parallel_scope() as strategy:
        ...     model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        ...     model.compile(optimizer="adam", loss="mse")
        ...     history = model.fit(np.zeros((8, 2)), np.zeros((8, 1)), batch_size=4, verbose=0)
        >>> len(history.history["loss"])
        1
    """
    backend = keras.backend.backend()
    if backend == "jax":
        distribution = _jax_data_parallel(devices)
        with distribution.scope():
            yield distribution
    elif backend == "tensorflow":
        strategy = setup_data_parallel(devices)
        with strategy.scope():
            yield strategy
    else:
        yield setup_data_parallel(devices)


# ---- More than one process (and so more than one host) -------------------------------------

# The environment variables that put a process into a job when no flag does: Keras' own
# (`keras.distribution.initialize` reads them) and the coordinator JAX reads itself.
JOB_ENVIRONMENT = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
                   "KERAS_DISTRIBUTION_PROCESS_ID", "JAX_COORDINATOR_ADDRESS")

# What a collective or the coordination service says when a peer process has gone.
_LOST_PEER_WORDS = ("gloo", "connection closed", "connection reset", "heartbeat",
                    "coordination service", "unavailable:", "deadline_exceeded")


@dataclasses.dataclass(frozen=True)
class JobSettings:
    """Where a process stands in a multi-process job: the coordinator's `host:port`, the
    number of processes and this process's index (0 is the coordinator and the one that
    writes). None leaves a value to JAX's cluster detection (SLURM, Open MPI, Kubernetes)."""

    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None

    @property
    def is_multi_process(self) -> bool:
        """True unless nothing names a job or the job has one process."""
        if self.num_processes == 1:
            return False
        return (self.coordinator_address is not None or self.num_processes is not None
                or self.process_id is not None)


def job_settings(coordinator_address: str | None = None, num_processes: int | None = None,
                 process_id: int | None = None,
                 environ: Mapping[str, str] | None = None) -> JobSettings:
    """The job settings from flags, each missing one from the environment.

    Args:
        coordinator_address: `host:port` of process 0; else the first of
            `KERAS_DISTRIBUTION_JOB_ADDRESSES` (a comma-separated list), else
            `JAX_COORDINATOR_ADDRESS`.
        num_processes: else `KERAS_DISTRIBUTION_NUM_PROCESSES`.
        process_id: else `KERAS_DISTRIBUTION_PROCESS_ID`.
        environ: the environment (`os.environ` by default).

    Returns:
        The settings; `is_multi_process` is False when nothing names a job.

    Raises:
        UserError: an environment variable that is not a number where one belongs.
    """
    environ = os.environ if environ is None else environ
    if coordinator_address is None:
        addresses = environ.get("KERAS_DISTRIBUTION_JOB_ADDRESSES", "").strip()
        coordinator_address = (addresses.split(",")[0].strip() if addresses
                               else environ.get("JAX_COORDINATOR_ADDRESS") or None)
    if num_processes is None:
        num_processes = _int_from(environ, "KERAS_DISTRIBUTION_NUM_PROCESSES")
    if process_id is None:
        process_id = _int_from(environ, "KERAS_DISTRIBUTION_PROCESS_ID")
    return JobSettings(coordinator_address, num_processes, process_id)


def _int_from(environ: Mapping[str, str], name: str) -> int | None:
    text = environ.get(name, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise UserError(f"environment variable {name} must be an int; got {text!r}") from None


def check_job_settings(settings: JobSettings, backend: str | None = None) -> None:
    """Refuses settings that cannot start a job, before anything is loaded.

    Raises:
        UserError: one line: a process id outside the job, or a multi-process job on a
            backend other than JAX (Keras 3's `fit` does not run under TensorFlow's
            `MultiWorkerMirroredStrategy`, keras-team/keras#20585).
    """
    if not settings.is_multi_process:
        return
    backend = backend or keras.backend.backend()
    if backend != "jax":
        raise UserError(
            f"multi-process training runs on the JAX backend (KERAS_BACKEND=jax); got "
            f"KERAS_BACKEND={backend} (Keras 3's fit does not run under TensorFlow's "
            "MultiWorkerMirroredStrategy, keras-team/keras#20585; exports still come from "
            "either backend)")
    num, index = settings.num_processes, settings.process_id
    if num is not None and index is not None and not 0 <= index < num:
        raise UserError(f"--process-id must lie in [0, {num - 1}] for --num-processes {num}; "
                        f"got {index}")
    if settings.coordinator_address is None:
        raise UserError("a job of several processes needs --coordinator-address HOST:PORT "
                        "(process 0's), beside --num-processes and --process-id")
    check_address(settings.coordinator_address, is_coordinator=index == 0)


def join_job(settings: JobSettings, heartbeat_timeout_seconds: int = 100,
             initialization_timeout_seconds: int = 300,
             published: Mapping[str, Any] | None = None) -> Any:
    """Joins a multi-process JAX job and trains data-parallel over every device of it.

    Calls `jax.distributed.initialize` (CPU collectives over gloo, so that the same path
    runs on CPUs) and sets a `keras.distribution.DataParallel` over the job's global device
    list as Keras' distribution. Each process then feeds its own rows of every global batch
    (`ProcessShard`); Keras assembles them into the global batch (its JAX trainer calls
    `jax.make_array_from_process_local_data`), so N steps give the weights of one process
    trained on the same global batches. SIGTERM or Ctrl-C in any process then stops every
    process at one step of `fit_resumably` (`zoo.training.job_stop`). Call it before any
    model or JAX array is made.

    Args:
        settings: from `job_settings`; a single-process one does nothing.
        heartbeat_timeout_seconds: a process silent this long counts as dead and the job
            ends.
        initialization_timeout_seconds: how long to wait for every process to join; then
            each process ends in one line (`zoo.training.job_startup.within`).
        published: the job's settings, which every process must share
            (`zoo.training.job_startup.agree_on_settings`; compared within the same time).

    Returns:
        The `DataParallel` distribution, or None for a single process.
    """
    if not settings.is_multi_process:
        return None
    check_job_settings(settings)
    import jax

    # Only the CPU client reads it: GPUs keep their own collectives (NCCL).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    index, count = settings.process_id, settings.num_processes
    with within(initialization_timeout_seconds,
                f"process {index} of {count} did not see the whole job at "
                f"{settings.coordinator_address}"):
        jax.distributed.initialize(
            coordinator_address=settings.coordinator_address, num_processes=count,
            process_id=index, initialization_timeout=initialization_timeout_seconds + 30,
            heartbeat_timeout_seconds=heartbeat_timeout_seconds)
        if published is not None and index is not None and count:
            agree_on_settings(published, index, count, initialization_timeout_seconds)
    hand_ctrl_c_to_the_job()  # one process's Ctrl-C stops the job (zoo.training.job_stop)
    # Batches arrive already split by process (ProcessShard): Keras must not shard again.
    distribution = keras.distribution.DataParallel(
        devices=keras.distribution.list_devices(), auto_shard_dataset=False)
    keras.distribution.set_distribution(distribution)
    return distribution


def process_count() -> int:
    """The number of processes of the job this process trains in (1 outside a job)."""
    if keras.backend.backend() != "jax":
        return 1
    import jax

    return jax.process_count()


def process_index() -> int:
    """This process's index in its job; 0 outside a job."""
    if keras.backend.backend() != "jax":
        return 0
    import jax

    return jax.process_index()


def is_chief() -> bool:
    """Whether this process writes the run's files: process 0, or the only process."""
    return process_index() == 0


def is_lost_peer(error: BaseException) -> bool:
    """Whether `error` says that another process of the job has gone (a collective whose
    connection closed, a missed heartbeat), rather than a fault of this process."""
    text = f"{type(error).__name__} {error}".lower()
    return process_count() > 1 and any(word in text for word in _LOST_PEER_WORDS)


class ProcessShard(keras.utils.PyDataset):
    """This process's rows of every global batch of `batches`.

    Process k of N takes the k-th of N equal slices of each batch's rows, so that the
    processes' slices, put together in process order, are the global batch. A batch whose
    size is not a multiple of N is completed with its own first rows again (a few examples
    of the last batch counted twice, never an empty slice).

    Args:
        batches: a `keras.utils.PyDataset` of global batches: arrays or tuples of them.
        index: this process's index (`process_index()` by default).
        count: the number of processes (`process_count()` by default).
    """

    def __init__(self, batches: Any, index: int | None = None,
                 count: int | None = None) -> None:
        super().__init__()
        self.batches = batches
        self.index = process_index() if index is None else index
        self.count = process_count() if count is None else count

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, position: int) -> Any:
        return keras.tree.map_structure(self._rows, self.batches[position])

    def _rows(self, array: Any) -> Any:
        rows = np.asarray(array)
        size = rows.shape[0]
        whole = -(-size // self.count) * self.count
        if whole != size:
            rows = rows[np.arange(whole) % size]
        part = whole // self.count
        return rows[self.index * part:(self.index + 1) * part]

    def on_epoch_end(self) -> None:
        self.batches.on_epoch_end()


def predict_in_batches(model: keras.Model, inputs: np.ndarray, batch_size: int = 256
                       ) -> np.ndarray:
    """`model.predict` that also works in a multi-process job: there, `predict` would hand
    back a global array that no one process can read, so every process calls the model on
    the same batches itself."""
    if process_count() == 1:
        return model.predict(inputs, batch_size=batch_size, verbose=0)
    parts = [np.asarray(model(inputs[start:start + batch_size], training=False))
             for start in range(0, len(inputs), batch_size)]
    return np.concatenate(parts)


def barrier(name: str) -> None:
    """Waits until every process of the job reaches the barrier `name` (nothing outside a
    job): for example until process 0 has written a file the others then read."""
    if process_count() == 1:
        return
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)
