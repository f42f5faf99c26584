"""A training recipe as one process of a multi-process job (JAX), and how such a job ends.

`zoo train vit|translator` and `zoo finetune` join a job when their flags
(`--coordinator-address`, `--num-processes`, `--process-id`) or the environment name one
(`zoo.training.distribution.job_settings`); the JAX machinery does the rest:
`jax.distributed.initialize`, gloo collectives on CPUs, and Keras' `DataParallel` over the
job's devices (`zoo.training.distribution.join_job`). Every process runs the whole recipe on
the same data and feeds its share of each global batch (`ProcessShard`); process 0 alone
holds the run folder and writes checkpoints, logs, `model.keras` and `metrics.json`
(`zoo.training.run`). Every process resumes from the run folder's last checkpoint, so the
folder must be one that every host sees (a shared filesystem) when the job spans hosts.

When a process of the job dies, each other one ends in one line; a SIGTERM or Ctrl-C in one
process stops every process after the same step, each in one line (`ending_with_the_job`).
The run folder keeps its last complete checkpoint, and the same commands started again
resume from it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from zoo.training.errors import UserError
from zoo.training.distribution import (JobSettings, check_job_settings, is_lost_peer,
                                       job_settings, join_job, process_count, process_index)
from zoo.training.job_startup import end_job
from zoo.training.job_stop import JobStopped
from zoo.training.run import hold_run_folder


def recipe_job(recipe: Any) -> JobSettings:
    """The job a recipe's settings (or, where they are 'none', the environment) name."""
    return job_settings(recipe.coordinator_address, recipe.num_processes, recipe.process_id)


def check_recipe_job(recipe: Any, backend: str | None = None) -> None:
    """Refuses job settings that cannot run, in one line: a process id outside the job, a
    backend other than JAX, or (a ViT recipe) batches made on the device, which one process
    draws for the whole batch.

    Raises:
        zoo.UserError: the first problem.
    """
    job = recipe_job(recipe)
    check_job_settings(job, backend)
    if job.is_multi_process and getattr(recipe, "data_placement", "host") != "host":
        raise UserError("--data-placement device does not combine with multi-process "
                        "training; use --data-placement host")


def join_recipe_job(recipe: Any) -> bool:
    """Joins the job the recipe names (nothing for a single process); returns whether this
    process is one of several. Call it before any model is made."""
    check_recipe_job(recipe)
    job = recipe_job(recipe)
    join_job(job, heartbeat_timeout_seconds=recipe.heartbeat_timeout,
             initialization_timeout_seconds=recipe.startup_timeout,
             published=published_settings(recipe))
    return job.is_multi_process


# Settings each process has its own of: the rest must be the same in every process. The
# coordinator's address too: a host may reach process 0 by another name (its own host name,
# localhost on process 0's), and a wrong one never joins (`--startup-timeout`).
PER_PROCESS = ("process_id", "force", "data", "output", "coordinator_address")


def published_settings(recipe: Any) -> dict:
    """The recipe's settings that every process of a job must share (`PER_PROCESS` left
    out: paths may differ between hosts), which process 0 publishes and the others check
    (`zoo.training.job_startup.agree_on_settings`); the number of processes as the job has
    it, from the flag or else the environment (`recipe_job`)."""
    import dataclasses

    settings = {key: value for key, value in dataclasses.asdict(recipe).items()
                if key not in PER_PROCESS}
    settings["num_processes"] = recipe_job(recipe).num_processes
    return settings


@contextlib.contextmanager
def ending_with_the_job() -> Iterator[None]:
    """Ends this process in one line on stderr when its job ends under it: another process
    of the job lost (`is_lost_peer`, status 1), or the job stopped by a SIGTERM or Ctrl-C in
    one of its processes (`JobStopped`, status 143, or 130 where the Ctrl-C was); any other
    error passes through.

    The exit skips Python's clean-up on purpose: JAX's own shutdown waits at a barrier for
    every process of the job, the lost one included, and then aborts with a page of
    native log lines.
    """
    try:
        yield
    except JobStopped as stopped:
        end_job(str(stopped), status=stopped.status)
    except Exception as error:
        if not is_lost_peer(error):
            raise
        cause = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        end_job(f"process {process_index()} of {process_count()} lost another process of "
                f"the job ({cause}); the run folder keeps its last checkpoint: start every "
                "process again to resume")


def run_recipe(recipe: Any, check: Callable[[Any], None], run_files: tuple[str, ...],
               train: Callable[[Any], dict]) -> dict:
    """Runs a training recipe: `check(recipe)` before anything is read or written, the job
    joined (nothing for a single process), then `train(recipe)` with the output folder held
    throughout (`zoo.training.run.hold_run_folder`; a second run into it meanwhile is refused
    in one line) and a lost peer ending this process in one line; returns what `train`
    returns, the metrics written to metrics.json."""
    check(recipe)
    join_recipe_job(recipe)  # before the folder is held: process 0 alone holds it
    with ending_with_the_job(), hold_run_folder(recipe.output, run_files, recipe.force):
        return train(recipe)
