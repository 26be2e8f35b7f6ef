"""fragflow.distributed: past one GPU, through Ray (``pip install 'fragflow[ray]'``).

- ``predict(dataset, model, num_actors=N)``: batch inference over a ``ray.data.Dataset`` with N
  actors, each owning one Session (on its own GPU where Ray gives it one); the output rows keep
  the input order; a dead actor is replaced and its batches rerun (inference.py says how).
- ``DataParallelTrainer(build, num_workers=N)``: synchronous data-parallel training; every
  worker builds the same graph, takes its slice of each global batch, the gradients are averaged
  (weighted by slice size) and every replica applies the same optimizer update, so after k steps
  the weights are those of one process training on the full batches. Checkpoints every n steps;
  a worker that dies is replaced and the run resumes from the last checkpoint.

This package sits beside tools/ at the top of the layers (docs/ARCHITECTURE.md): it is a client
of the public API (``import fragflow as ff``) and nothing in fragflow imports it. Importing it
does not import Ray; using it without Ray raises RayNotInstalledError. docs/SCALING.md: what a
step costs and how it scales.

    >>> import ray                                                   # doctest: +SKIP
    >>> from fragflow.distributed import GraphModel, predict         # doctest: +SKIP
    >>> model = GraphModel.from_session(sess, inputs=[x], outputs=[y])  # doctest: +SKIP
    >>> out = predict(ray.data.from_numpy(xs), model, input_columns=["data"])  # doctest: +SKIP
"""
from .errors import RayNotInstalledError, WorkerLostError
from .inference import predict
from .models import GraphModel, OnnxModel
from .training import DataParallelTrainer, StepStats, TrainGraph

__all__ = ["predict", "GraphModel", "OnnxModel", "DataParallelTrainer", "TrainGraph",
           "StepStats", "RayNotInstalledError", "WorkerLostError"]
