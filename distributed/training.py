"""Synchronous data-parallel training over Ray actors, one Session each.

Every worker builds the same graph (the user's build function, run in the worker), so
the replicas start from the same weights (rank 0's are broadcast to make sure). A
step: the global batch is split into one slice per worker; each computes the loss and
the gradients of its slice's mean loss; the gradients are averaged weighted by slice
size (so the average is exactly the full batch's mean-loss gradient, up to float32
rounding); every replica applies that average with the same optimizer graph, so the
replicas stay identical and equal to one process training on the full batches.

Averaging ("allreduce"):
- "object_store" (default): the workers' gradients come back through Ray's object
  store, the driver sums them and puts the average once; each worker reads it back.
  Two round trips a step, no extra dependency.
- "collective": ray.util.collective's gloo all-reduce among the workers (needs torch:
  Ray's gloo group is torch.distributed's); one round trip a step from the driver.
docs/SCALING.md has what each costs here and the choice; DataParallelTrainer, how a
run recovers from a dead worker.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time

import numpy as np

import fragflow as ff
from fragflow import FeedError, FragflowError

from .errors import WorkerLostError, require_ray

ALLREDUCE = ("object_store", "collective")


@dataclasses.dataclass
class TrainGraph:
    """What a build function returns: the loss (mean over the batch), the placeholders
    a global batch feeds (batch axis first; each is split across workers), and the
    optimizer. var_list: the variables to train (default: every trainable one the loss
    depends on)."""

    loss: object
    inputs: list
    optimizer: object
    var_list: list | None = None


@dataclasses.dataclass
class StepStats:
    """One training step: loss over the global batch, examples per worker, and where
    the time went (seconds): compute (each worker's gradient run), apply (the slowest
    worker's optimizer update), allreduce (averaging the gradients: the driver's sum in
    object_store mode, the slowest worker's all-reduce call in collective mode),
    transfer (the rest of the step's wall time: Ray calls, object store traffic)."""

    step: int
    loss: float
    examples: list
    seconds: float
    compute: list
    apply: float
    allreduce: float
    transfer: float

    @property
    def throughput(self) -> float:
        return sum(self.examples) / self.seconds

    def line(self, total_steps: int | None = None) -> str:
        per_worker = ", ".join(f"w{i} {n / self.seconds:.0f}" for i, n in enumerate(self.examples))
        of = f"/{total_steps}" if total_steps else ""
        return (f"step {self.step}{of}  loss {self.loss:.5f}  {self.throughput:.0f} ex/s "
                f"({per_worker})  compute {max(self.compute) * 1e3:.1f} ms  transfer "
                f"{self.transfer * 1e3:.1f} ms  allreduce {self.allreduce * 1e3:.1f} ms  "
                f"apply {self.apply * 1e3:.1f} ms")


class TrainWorker:
    """One replica (a Ray actor): the graph, its gradients, and the update that applies
    averaged gradients fed through placeholders."""

    def __init__(self, build, rank: int, device=None):
        with ff.Graph().as_default():
            spec = build()
        if not isinstance(spec, TrainGraph):
            raise ff.FragflowError(f"the build function must return a "
                                   f"fragflow.distributed.TrainGraph, got {spec!r}")
        graph = spec.loss.graph
        variables = list(spec.var_list or ff.optim.trainable_variables(spec.loss))
        grads = ff.gradients(spec.loss, variables)
        with graph.as_default():
            with ff.name_scope("allreduce"):
                averaged = [ff.placeholder(tuple(v.shape), "float32", name=f"grad_{i}")
                            for i, v in enumerate(variables)]
            # inside as_default: Adam's update otherwise builds part of itself in the
            # default graph (GraphError "'sqrt' belongs to graph 'default'")
            update = spec.optimizer.apply_gradients(list(zip(averaged, variables)))
        self.rank = rank
        self.session = ff.Session(graph, device=device)
        self._grad_fn = self.session.compile([spec.loss, *grads], feeds=list(spec.inputs))
        self._apply_fn = self.session.compile([update], feeds=averaged)
        self._shapes = [tuple(v.shape) for v in variables]
        self._sizes = [int(np.prod(s)) for s in self._shapes]
        self.trainable = [v.name for v in variables]
        self._state = [n.name for n in graph.nodes if n.op == "variable"]
        self._group = None

    # -- the two halves of a step -------------------------------------------------------
    def compute(self, *shard):
        """(flat float32 gradients of the slice's mean loss, that loss, slice size, seconds)."""
        start = time.perf_counter()
        n = len(shard[0])
        if n == 0:                          # a global batch smaller than the workers
            return np.zeros(sum(self._sizes), np.float32), 0.0, 0, 0.0
        loss, *grads = self._grad_fn(*shard)
        flat = np.concatenate([np.ravel(g) for g in grads]).astype(np.float32, copy=False)
        return flat, float(loss), n, time.perf_counter() - start

    def apply(self, flat_average) -> float:
        start = time.perf_counter()
        parts, offset = [], 0
        for shape, size in zip(self._shapes, self._sizes):
            parts.append(np.asarray(flat_average[offset:offset + size], np.float32).reshape(shape))
            offset += size
        self._apply_fn(*parts)
        return time.perf_counter() - start

    # -- collective mode ------------------------------------------------------------------
    def join_group(self, world_size: int, group: str) -> None:
        import ray.util.collective as col  # optional (fragflow[ray]), in the worker
        col.init_collective_group(world_size, self.rank, backend="gloo", group_name=group)
        self._group = group

    def step_collective(self, *shard):
        """compute, all-reduce (sum) among the group, apply: (loss sum, n, compute s,
        allreduce s, apply s)."""
        import ray.util.collective as col  # optional (fragflow[ray]), in the worker
        import torch  # optional: collective mode's gloo group is torch's
        flat, loss, n, compute = self.compute(*shard)
        start = time.perf_counter()
        # the slice sizes ride along as the last element, so one all-reduce gives both
        tensor = torch.from_numpy(np.append(flat * n, [loss * n, n]).astype(np.float32))
        col.allreduce(tensor, group_name=self._group)
        total = tensor.numpy()
        reduce = time.perf_counter() - start
        apply = self.apply(total[:-2] / total[-1])
        return float(total[-2] / total[-1]), n, compute, reduce, apply

    # -- state ----------------------------------------------------------------------------
    def get_state(self) -> dict:
        """Every variable of the graph (weights and optimizer state) by name."""
        graph = self.session.graph
        return {name: self.session.get(graph.value(name)) for name in self._state}

    def set_state(self, state: dict) -> None:
        graph = self.session.graph
        for name in self._state:
            self.session.set(graph.value(name), state[name])

    def trainable_names(self) -> list:
        return list(self.trainable)

    def ping(self) -> int:
        return self.rank


def _actor_errors(ray) -> tuple:
    """The exceptions that mean "a worker is gone" (ActorUnavailableError is Ray >= 2.30)."""
    names = ("RayActorError", "ActorDiedError", "ActorUnavailableError")
    return tuple(getattr(ray.exceptions, n) for n in names if hasattr(ray.exceptions, n))


def _split(batch, n: int) -> list:
    arrays = [np.asarray(a) for a in batch]
    size = len(arrays[0])
    if any(len(a) != size for a in arrays):
        raise FeedError(f"a global batch's arrays differ in length: "
                        f"{[len(a) for a in arrays]}")
    bounds = np.linspace(0, size, n + 1).round().astype(int)
    return [tuple(a[bounds[i]:bounds[i + 1]] for a in arrays) for i in range(n)]


class DataParallelTrainer:
    """Synchronous data-parallel training of the graph `build()` makes, on num_workers
    Ray actors (see the module docstring).

    build: a function taking no arguments, run in each worker under a fresh default
    graph, returning a TrainGraph. checkpoint_every: steps between checkpoints (None:
    only the start). checkpoint_dir: also write each as step_NNNNNN.npz (Session.restore
    reads it). allreduce: "object_store" or "collective". verbose: print a line per step (every
    log_every steps) with the loss, examples/s per worker and in total, and the time split.

    Recovery: every `checkpoint_every` steps the driver keeps (and, with checkpoint_dir,
    writes) every variable of rank 0, optimizer state included. When a worker dies the
    dead ones are replaced (all of them in "collective" mode: the group is rebuilt), every
    replica is restored from the last checkpoint, and the run resumes at its step with the
    same batches, so the final weights are those of an uninterrupted run.

    >>> trainer = DataParallelTrainer(build, num_workers=2)      # doctest: +SKIP
    >>> trainer.fit([(x0, y0), (x1, y1)])     # global batches  # doctest: +SKIP
    >>> trainer.get_weights()                 # {name: array}   # doctest: +SKIP
    """

    def __init__(self, build, num_workers: int = 2, *, checkpoint_every: int | None = None,
                 checkpoint_dir: str | None = None, allreduce: str = "object_store",
                 num_cpus_per_worker: float = 1, num_gpus_per_worker: float = 0,
                 device: int | None = None, verbose: int = 1, log_every: int = 1,
                 max_recoveries: int = 3, stream=None):
        ray = require_ray()
        if allreduce not in ALLREDUCE:
            raise FragflowError(f"allreduce={allreduce!r}; use one of {ALLREDUCE}")
        if num_workers < 1:
            raise FragflowError(f"num_workers must be >= 1, got {num_workers}")
        self._ray = ray
        self._build, self.num_workers, self.allreduce = build, num_workers, allreduce
        self.checkpoint_every, self.checkpoint_dir = checkpoint_every, checkpoint_dir
        self.verbose, self.log_every, self.max_recoveries = verbose, log_every, max_recoveries
        self.stream = stream or sys.stdout
        self._actor = ray.remote(TrainWorker).options(
            num_cpus=num_cpus_per_worker, num_gpus=num_gpus_per_worker, max_restarts=0)
        self._device = device
        self._generation = 0
        self.workers = [self._new_worker(rank) for rank in range(num_workers)]
        self._join_group()
        initial = self._ray.get(self.workers[0].get_state.remote())
        self._broadcast(initial)
        self.step, self.history, self.recoveries = 0, [], []
        self._checkpoint = (0, initial)

    # -- workers --------------------------------------------------------------------------
    def _new_worker(self, rank: int):
        return self._actor.remote(self._build, rank, self._device)

    def _join_group(self) -> None:
        if self.allreduce != "collective":
            return
        self._generation += 1
        group = f"fragflow_dp_{os.getpid()}_{id(self)}_{self._generation}"
        self._ray.get([w.join_group.remote(self.num_workers, group) for w in self.workers])

    def _broadcast(self, state: dict) -> None:
        ref = self._ray.put(state)
        self._ray.get([w.set_state.remote(ref) for w in self.workers])

    # -- training -------------------------------------------------------------------------
    def fit(self, batches, on_step=None) -> list:
        """Run one step per global batch from self.step on (a sequence: after a failure
        the steps since the last checkpoint are run again with the same batches).
        Each batch is a tuple of arrays, one per TrainGraph input. on_step(step, trainer)
        is called after each step. Returns the StepStats of every step."""
        ray = self._ray
        while self.step < len(batches):
            try:
                stats = self._run_step(batches[self.step])
            except _actor_errors(ray) as err:
                self._recover(err)
                continue
            self.step += 1
            stats.step = self.step
            self.history.append(stats)
            if self.verbose and (self.step % self.log_every == 0 or self.step == len(batches)):
                print(stats.line(len(batches)), file=self.stream, flush=True)
            if self.checkpoint_every and self.step % self.checkpoint_every == 0:
                self._save_checkpoint()
            if on_step is not None:
                on_step(self.step, self)
        return list(self.history)

    def _run_step(self, batch) -> StepStats:
        ray = self._ray
        shards = _split(batch, self.num_workers)
        start = time.perf_counter()
        if self.allreduce == "collective":
            results = ray.get([w.step_collective.remote(*s) for w, s in zip(self.workers, shards)])
            seconds = time.perf_counter() - start
            loss = results[0][0]
            compute = [r[2] for r in results]
            reduce = max(r[3] for r in results)
            apply = max(r[4] for r in results)
            return StepStats(0, loss, [r[1] for r in results], seconds, compute, apply,
                             reduce, max(0.0, seconds - max(compute) - reduce - apply))
        results = ray.get([w.compute.remote(*s) for w, s in zip(self.workers, shards)])
        gathered = time.perf_counter()
        total = sum(r[2] for r in results)
        summed = np.zeros(len(results[0][0]), np.float64)
        for flat, _, n, _ in results:
            summed += flat.astype(np.float64) * n     # weighted: slices may differ in size
        average = (summed / total).astype(np.float32)
        reduced = time.perf_counter()
        ref = ray.put(average)
        applied = ray.get([w.apply.remote(ref) for w in self.workers])
        seconds = time.perf_counter() - start
        compute = [r[3] for r in results]
        apply, reduce = max(applied), reduced - gathered
        return StepStats(0, sum(r[1] * r[2] for r in results) / total, [r[2] for r in results],
                         seconds, compute, apply, reduce,
                         max(0.0, seconds - max(compute) - reduce - apply))

    # -- checkpoints and recovery ------------------------------------------------------
    def _save_checkpoint(self) -> None:
        state = self._ray.get(self.workers[0].get_state.remote())
        self._checkpoint = (self.step, state)
        if self.checkpoint_dir:
            os.makedirs(self.checkpoint_dir, exist_ok=True)
            np.savez(os.path.join(self.checkpoint_dir, f"step_{self.step:06d}.npz"), **state)

    def _alive(self, worker) -> bool:
        try:
            self._ray.get(worker.ping.remote(), timeout=60)
            return True
        except Exception:         # noqa: BLE001 -- any failure to answer means: replace it
            return False

    def _recover(self, err) -> None:
        if len(self.recoveries) >= self.max_recoveries:
            raise WorkerLostError(f"workers died {len(self.recoveries) + 1} times (last: "
                                  f"{type(err).__name__}); gave up after max_recoveries="
                                  f"{self.max_recoveries}") from err
        if self.allreduce == "collective":      # a gloo group cannot take a new member
            dead = list(range(self.num_workers))
            for worker in self.workers:
                self._ray.kill(worker)
        else:
            dead = [rank for rank, w in enumerate(self.workers) if not self._alive(w)]
        for rank in dead:
            self.workers[rank] = self._new_worker(rank)
        self._join_group()
        step, state = self._checkpoint
        self._broadcast(state)
        lost = self.step
        self.step = step
        del self.history[step:]
        self.recoveries.append({"failed_at_step": lost + 1, "replaced": dead,
                                "resumed_from": step})
        if self.verbose:
            print(f"worker(s) {dead} lost at step {lost + 1} ({type(err).__name__}); "
                  f"replaced, resuming from the checkpoint of step {step}",
                  file=self.stream, flush=True)

    # -- results ----------------------------------------------------------------------------
    def get_weights(self) -> dict:
        """The trained variables of rank 0, {name: array}."""
        names = self._ray.get(self.workers[0].trainable_names.remote())
        state = self._ray.get(self.workers[0].get_state.remote())
        return {name: state[name] for name in names}

    def replica_states(self) -> list:
        """Every variable (optimizer state included) of every replica, rank order."""
        return self._ray.get([w.get_state.remote() for w in self.workers])

    def shutdown(self) -> None:
        """Stop the workers (Ray itself stays up)."""
        for worker in self.workers:
            self._ray.kill(worker)
        self.workers = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
