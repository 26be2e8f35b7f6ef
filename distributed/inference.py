"""Batch inference over a ray.data.Dataset: an actor pool, one Session per actor.

Ray Data does the scheduling: map_batches with an actor pool of num_actors, each actor
opening the model once (a GL context and compiled plans are worth keeping). Order:
the dataset's preserve_order execution option keeps output rows in input order.
Failures: Ray Data's actor pools restart a dead actor and retry its tasks (they
default to max_restarts=-1, max_task_retries=-1), so a batch whose actor died is run
again on the replacement; a model's outputs depend only on its inputs, so a rerun
batch gives the same rows."""
from __future__ import annotations

import numpy as np

from fragflow import FragflowError

from .errors import require_ray


class _Predictor:
    """One Ray Data actor: a Session on this process's GL device (the GPU Ray gave the
    actor through CUDA_VISIBLE_DEVICES, else llvmpipe)."""

    def __init__(self, model, input_columns, output_columns, device=None):
        self.session, self.fn = model.open(device)
        self.input_columns, self.output_columns = input_columns, output_columns

    def __call__(self, batch: dict) -> dict:
        arrays = [np.asarray(batch[c]) for c in self.input_columns]
        outputs = self.fn(*arrays)
        return dict(zip(self.output_columns, outputs))


def predict(dataset, model, *, num_actors: int = 2, batch_size: int = 64,
            input_columns=None, output_columns=None, num_gpus_per_actor: float = 0,
            num_cpus_per_actor: float = 1, device: int | None = None,
            ray_remote_args: dict | None = None):
    """A ray.data.Dataset of `model`'s outputs for every row of `dataset`, in order.

    model: a GraphModel or OnnxModel (or anything with open(device) -> (session, fn)
    and input_names / output_names). input_columns: the dataset's columns fed to the
    model's inputs, in order (default: the input names; ray.data.from_numpy names its
    column "data"). output_columns: names of the output columns (default: the model's
    output names). num_gpus_per_actor: give each actor a GPU (Ray sets its
    CUDA_VISIBLE_DEVICES, and its Session runs there). device: force an EGL device
    index in every actor (normally left to Ray). The result is lazy, like every
    Dataset: iterate it, or take_all() / to_pandas(). Keeping the order sets
    preserve_order in the execution options of the DataContext the datasets share."""
    ray = require_ray()
    if num_actors < 1:
        raise FragflowError(f"predict: num_actors must be >= 1, got {num_actors}")
    inputs = list(input_columns or model.input_names)
    outputs = list(output_columns or model.output_names)
    if len(inputs) != len(model.input_names):
        raise FragflowError(f"predict: the model takes {len(model.input_names)} input(s) "
                            f"({', '.join(model.input_names)}) but input_columns names "
                            f"{len(inputs)} ({', '.join(inputs)})")
    if len(outputs) != len(model.output_names):
        raise FragflowError(f"predict: the model has {len(model.output_names)} output(s) "
                            f"but output_columns names {len(outputs)}")
    remote_args = dict(ray_remote_args or {})
    result = dataset.map_batches(
        _Predictor, batch_size=batch_size, batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=num_actors),
        fn_constructor_args=(model, inputs, outputs, device),
        num_gpus=num_gpus_per_actor, num_cpus=num_cpus_per_actor, **remote_args)
    result.context.execution_options.preserve_order = True
    return result
