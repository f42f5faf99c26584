"""Every process of a job stops at one step when any one of them is told to stop.

A scheduler that preempts a job sends its processes SIGTERM; a user presses Ctrl-C in the
terminal of one. A process that simply ended there would leave the others waiting in a
collective, and one that ignored the signal would train to the end and exit 0 (JAX's
preemption service, started by `jax.distributed.initialize`, catches SIGTERM and waits to be
asked about it). So, in a job of several processes:

- `StopWithTheJob`, a callback, asks JAX's preemption service after every training step
  whether the job has reached the step that every process agreed on after the notice
  (`jax.experimental.multihost_utils.reached_preemption_sync_point`, through the coordination
  service: no sockets of ours), and there raises `JobStopped` in every process alike. No
  checkpoint is half written: checkpoints are written at the ends of epochs, between steps.
- `hand_ctrl_c_to_the_job()` makes a Ctrl-C in a process of the job that same notice: it is
  noted (`zoo.training.interrupts.interrupted`) and sent on as SIGTERM to the process itself;
  a second Ctrl-C ends the process at once.

A notice that arrives before training starts stops the job after its first step; one that
arrives after the last step changes nothing (the run is complete). `zoo.recipes.multiprocess`
turns `JobStopped` into one line and the exit status.
"""

from __future__ import annotations

import signal

import keras

from zoo.training.interrupts import interrupted, pass_interrupts_on

# The exit statuses of a stopped job, as a shell reports the signals: 128 + the number.
STATUS_CTRL_C = 128 + signal.SIGINT
STATUS_TERMINATED = 128 + signal.SIGTERM


class JobStopped(Exception):
    """The job stopped at a step every process agreed on (SIGTERM or Ctrl-C in one of them).

    Attributes:
        status: the exit status this process should end with: 130 in a process that saw the
            Ctrl-C, 143 in the others.
    """

    def __init__(self, epoch: int, step: int, process: int, count: int) -> None:
        self.status = STATUS_CTRL_C if interrupted() else STATUS_TERMINATED
        super().__init__(
            f"process {process} of {count} stopped with the job after step {step} of epoch "
            f"{epoch} (SIGTERM or Ctrl-C reached a process of the job); the run folder keeps "
            "its last complete checkpoint: start every process again to resume")


def reached_stop(step: int) -> bool:
    """Whether every process of the job stops after training step `step` (counted from 1,
    the same in every process), because one of them received the preemption notice; False
    outside a job."""
    from jax.experimental import multihost_utils

    return multihost_utils.reached_preemption_sync_point(step)


class StopWithTheJob(keras.callbacks.Callback):
    """Raises `JobStopped` after the training step at which every process of the job stops
    (`reached_stop`). Every process of the job must use it in the same `fit`.

    Args:
        process: this process's index in the job.
        count: the number of processes of the job.
    """

    def __init__(self, process: int, count: int) -> None:
        super().__init__()
        self.process = process
        self.count = count
        self.steps = 0
        self.epoch = 0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.steps += 1
        if reached_stop(self.steps):
            raise JobStopped(self.epoch + 1, batch + 1, self.process, self.count)


def hand_ctrl_c_to_the_job() -> None:
    """From now on, a Ctrl-C in this process stops the whole job at one step (it is sent on
    as SIGTERM, the notice JAX's preemption service listens for) instead of ending this
    process alone, which would leave the others waiting; a second Ctrl-C ends it at once.
    Call it after `jax.distributed.initialize`."""
    pass_interrupts_on(signal.SIGTERM)
