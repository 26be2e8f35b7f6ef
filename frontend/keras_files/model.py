"""KerasModel: an ff.keras Model built from a Keras model config (a ModelSpec), with
Keras's several inputs and outputs, shared layers and nested models.

The layers are made once from their configs and called as the config's inbound nodes
say; a nested model is a NestedModel layer that runs its own spec. Training builds
the forward pass again with training=True on the same layers (Dropout and
BatchNormalization), so the weights are shared. Losses, metrics and progress are
Sequential's (frontend/models/); compile takes a loss per output (a list or a dict by
output name) and logs "loss", "<output>_loss" and "<output>_<metric>" as Keras does.
"""
from __future__ import annotations

import inspect
import math
import warnings

import numpy as np

from ...ir.errors import AttrError, FragflowError, ShapeError
from ...ir.graph import Graph
from .. import ops as _ops, optim as _optim
from ..interop.errors import short
from ..interop.importer import clean_name
from ..interop.limits import too_large
from ..layers import InputLayer, Layer, regularization_loss
from ..models.losses import LOSSES, sparse_categorical_crossentropy
from ..models.metrics import (
    ACCURACY_FOR_LOSS,
    METRICS,
    binary_accuracy,
    categorical_accuracy,
    per_example,
    sparse_categorical_accuracy,
)
from ..models.progress import History
from ..models.sequential import (
    OPTIMIZERS,
    EagerArray,
    Model,
    Sequential,
    _lookup,
    _training_dependent,
)
from ..models.training import evaluate_means, fit_loop, predict_batches
from ..tensor import Tensor
from .config import ModelSpec, NodeRef, OpLayer, Reader, _input_dtype, _input_shape
from .errors import KerasImportError, where


class _NotYet(Exception):
    """A node's input is not computed yet (the walk comes back to it)."""


def _call(layer, args, kwargs, training, here):
    """layer called as Keras calls it at a node: its positional arguments (a tensor, a
    list of tensors for a merging layer, query and value for attention) and the keyword
    arguments it takes (mask, initial_state, ...)."""
    accepted = inspect.signature(layer.__call__).parameters
    any_key = any(p.kind == p.VAR_KEYWORD for p in accepted.values())
    extra = {}
    for key, value in kwargs.items():
        if key == "training" or value is None:
            continue
        if key not in accepted and not any_key:
            raise KerasImportError(f"{here}: is called with {key}=..., which fragflow's "
                                   f"{type(layer).__name__} does not take")
        extra[key] = value
    try:
        return layer(*args, training=training, **extra)
    except KerasImportError:
        raise
    except FragflowError as err:
        raise KerasImportError(f"{here}: {err}") from None
    except MemoryError:
        raise KerasImportError(f"{here}: building it ran out of memory") from None
    except RecursionError:
        raise KerasImportError(f"{here}: building it recursed too deep") from None
    except Exception as err:     # noqa: BLE001 -- a hostile config ends in a clear error
        raise KerasImportError(f"{here}: cannot build the layer: {type(err).__name__}: "
                               f"{str(err)[:300]}") from err


def run_spec(spec: ModelSpec, objects: dict, inputs: list, training: bool,
             record=None) -> list:
    """The output tensors of spec's layers (objects: name -> layer) on inputs; record
    (a dict) gets {(layer name, node index): [(shape, dtype) of each output]}, what a
    saved config says of each tensor."""
    if spec.kind == "Sequential":
        x = inputs[0]
        for ls in spec.layers:
            x = _call(objects[ls.name], [x], {}, training, where(ls.name, ls.class_name))
            if record is not None:
                record[(ls.name, 0)] = [_info(t) for t in
                                        (x if isinstance(x, (list, tuple)) else [x])]
        return list(x) if isinstance(x, (list, tuple)) else [x]
    produced = {(ref.layer, ref.node): [t] for ref, t in zip(spec.inputs, inputs)}

    def resolve(value):
        if isinstance(value, NodeRef):
            outs = produced.get((value.layer, value.node))
            if outs is None:
                raise _NotYet(value)
            if value.tensor >= len(outs):
                raise KerasImportError(f"model {spec.name!r}: tensor {value.tensor} of "
                                       f"layer {value.layer!r} does not exist")
            return outs[value.tensor]
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        return value

    if record is not None:
        for key, outs in produced.items():
            record[key] = [_info(t) for t in outs]
    todo = [(ls, k, node) for ls in spec.layers for k, node in enumerate(ls.nodes)]
    while todo:
        rest = []
        for ls, k, (args, kwargs) in todo:
            try:
                args, kwargs = resolve(args), resolve(kwargs)
            except _NotYet:
                rest.append((ls, k, (args, kwargs)))
                continue
            out = _call(objects[ls.name], args, kwargs, training,
                        where(ls.name, ls.class_name))
            produced[(ls.name, k)] = list(out) if isinstance(out, (list, tuple)) else [out]
            if record is not None:
                record[(ls.name, k)] = [_info(t) for t in produced[(ls.name, k)]]
        if len(rest) == len(todo):
            ls, k, _ = rest[0]
            raise KerasImportError(f"{where(ls.name, ls.class_name)}: its call {k} waits "
                                   f"for a tensor no layer makes (a cycle, or an input "
                                   f"missing from the model's input_layers)")
        todo = rest
    try:
        return [resolve(ref) for ref in spec.outputs]
    except _NotYet as err:
        raise KerasImportError(f"model {spec.name!r}: output {tuple(err.args[0])} is not "
                               f"computed by any layer") from None


def _info(t) -> tuple:
    return (list(t.shape), t.dtype) if isinstance(t, Tensor) else (None, "float32")


def make_layers(spec: ModelSpec, reader: Reader, scope=None) -> dict:
    """name -> ff layer (or NestedModel, or InputLayer) for each layer of spec."""
    objects = {}
    for ls in spec.layers:
        if ls.model is not None:
            objects[ls.name] = NestedModel(ls.model, reader, scope)
        elif ls.class_name == "InputLayer":
            objects[ls.name] = InputLayer(name=ls.name)
        else:
            objects[ls.name] = reader.make_layer(ls, scope)
    return objects


def model_layers(spec, objects) -> list:
    """Keras's model.layers: the layers of spec in order, its op nodes left out."""
    return [objects[ls.name] for ls in spec.layers
            if not isinstance(objects[ls.name], OpLayer)]


def leaf_layers(layers):
    for layer in layers:
        if isinstance(layer, NestedModel):
            yield from leaf_layers(layer.layers)
        else:
            yield layer


class NestedModel(Layer):
    """A model used as a layer of another: its own layers (their weights under its
    name), run as its spec says on the tensors it is called on."""

    def __init__(self, spec: ModelSpec, reader: Reader, scope=None):
        super().__init__(name=spec.name, trainable=spec.trainable)
        self.spec = spec
        self.class_name = spec.kind
        inner = f"{scope}/{spec.name}" if scope else spec.name
        self._objects = make_layers(spec, reader, inner)
        self.layers = model_layers(spec, self._objects)
        self.tensor_info: dict = {}

    def __call__(self, inputs, training=False):
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        record = None if self.built else self.tensor_info
        outs = run_spec(self.spec, self._objects, inputs, training, record)
        self.built = True
        return outs[0] if len(outs) == 1 else outs

    @property
    def weights(self) -> list:
        return [w for layer in self.layers for w in layer.weights]

    @property
    def trainable_weights(self) -> list:
        if not self.trainable:
            return []
        return [w for layer in self.layers for w in layer.trainable_weights]

    @property
    def non_trainable_weights(self) -> list:
        if not self.trainable:
            return self.weights
        return [w for layer in self.layers for w in layer.non_trainable_weights]

    @property
    def updates(self):
        return [u for layer in leaf_layers(self.layers) for u in layer.updates]

    @updates.setter
    def updates(self, value):
        pass

    def get_layer(self, name=None, index=None):
        return _get_layer(self, name, index)

    def __repr__(self):
        return f"<ff.keras {self.class_name} '{self.name}' (nested)>"


def _given_shape(shape: tuple, given, name) -> tuple:
    """shape with the free dims given fills (None or -1: left free); a rank or known
    dim other than the config's is an error."""
    if given is None:
        return shape
    try:
        given = tuple(None if d is None or int(d) < 0 else int(d) for d in given)
    except (TypeError, ValueError):
        raise KerasImportError(f"input {name!r}: input_shapes gives {short(given)!r} (a "
                               f"tuple of ints or None)") from None
    if len(given) != len(shape) or any(s is not None and g is not None and s != g
                                       for s, g in zip(shape, given)):
        raise KerasImportError(f"input {name!r}: input_shapes gives {list(given)}; the "
                               f"model's input has shape {list(shape)}")
    return tuple(s if g is None else g for s, g in zip(shape, given))


def _get_layer(model, name, index):
    if index is not None:
        try:
            return model.layers[index]
        except (IndexError, TypeError):
            raise AttrError(f"model '{model.name}' has {len(model.layers)} layers; no "
                            f"index {index!r}") from None
    for layer in model.layers:
        if layer.name == name:
            return layer
    raise AttrError(f"model '{model.name}' has no layer {name!r} (its layers: "
                    f"{', '.join(layer.name for layer in model.layers)})")


class KerasModel(Model):
    """A Keras model read from a file (or a config): Sequential or Functional, with
    Keras's inputs, outputs, layers, weights and compile / fit / evaluate / predict /
    summary / save. See the module docstring."""

    def __init__(self, spec: ModelSpec, reader: Reader, backend="gl", input_shapes=None):
        Sequential.__init__(self, None, name=spec.name, backend=backend,
                            graph=Graph(clean_name(spec.name, "model")))
        self.spec = spec
        self.class_name = spec.kind
        with self.graph.as_default():
            self._objects = make_layers(spec, reader)
            self.layers = model_layers(spec, self._objects)
            self.inputs = self._placeholders(input_shapes or {})
            self.tensor_info: dict = {}
            self.outputs = run_spec(spec, self._objects, self.inputs, False,
                                    self.tensor_info)
        self._check_sizes(reader.max_elements)
        for ls in spec.layers:
            layer = self._objects[ls.name]
            layer.trainable = layer.trainable and ls.config.get("trainable", True) is not False
        self.input = self.inputs[0] if len(self.inputs) == 1 else list(self.inputs)
        self.output = self.outputs[0] if len(self.outputs) == 1 else list(self.outputs)
        self.input_names = [clean_name(t.op.name, "input") for t in self.inputs]
        if spec.kind == "Sequential":
            self.output_names = [spec.layers[-1].name] if spec.layers else []
        else:
            self.output_names = [ref.layer for ref in spec.outputs]
        self._chain = None
        self._training_outputs = None
        self._loss_fns = []
        self._loss_weights = []
        self._out_metrics = []
        self.compiled_config = None
        self.optimizer_state = None        # Keras's optimizer variables, from the file

    def _check_sizes(self, max_elements):
        """Every tensor the layers made is within max_elements (its known dims): a
        config cannot make predict allocate more than the load allows."""
        for node in self.graph.nodes:
            for value in node.outputs:
                count = too_large(value.shape, max_elements)
                if count is not None:
                    raise KerasImportError(
                        f"model {self.name!r}: {node.op} '{node.name}' would make a tensor "
                        f"of shape {list(value.shape)} = {count} elements, over "
                        f"max_elements={max_elements}")

    def _placeholders(self, input_shapes: dict) -> list:
        """The model's inputs: (None,) + the config's shape, or the shape input_shapes
        gives by input name (its rank and known dims as the config's). The names are
        Keras's: the InputLayer's, or for a Sequential without one Keras 2's and TF.js's
        "<first layer>_input" (its placeholder keeps the name "input")."""
        if self.spec.kind == "Sequential":
            shape = self.spec.input_shape
            if shape is None:
                raise KerasImportError(f"model {self.spec.name!r}: the Sequential's input "
                                       f"shape is not in the config (no InputLayer)")
            first = self.spec.layers[0].name if self.spec.layers else "input"
            entries = [(self.spec.input_name or f"{first}_input",
                        self.spec.input_name or "input", shape, self.spec.input_dtype)]
        else:
            by_name = {ls.name: ls for ls in self.spec.layers}
            entries = []
            for ref in self.spec.inputs:
                ls = by_name[ref.layer]
                if ls.class_name != "InputLayer":
                    raise KerasImportError(f"{where(ls.name, ls.class_name)}: a model input "
                                           f"must be an InputLayer")
                entries.append((ls.name, ls.name,
                                _input_shape(ls.config, where(ls.name, "InputLayer")),
                                _input_dtype(ls.config)))
        self.input_layer_names = [name for name, _, _, _ in entries]
        unknown = sorted(set(input_shapes) - set(self.input_layer_names))
        if unknown:              # before the layers are built on the shapes it misses
            raise KerasImportError(f"input_shapes names {', '.join(map(short, unknown))}; "
                                   f"the model's inputs are "
                                   f"{', '.join(self.input_layer_names)}")
        return [_ops.placeholder(_given_shape((None,) + tuple(shape[1:]),
                                              input_shapes.get(name), name),
                                 dtype, name=clean_name(op_name, "input"))
                for name, op_name, shape, dtype in entries]

    # -- structure ----------------------------------------------------------------------
    def __call__(self, inputs, training=False):
        """On tensors: the model's layers applied to them (its weights shared). On
        arrays (TF2's eager model(x)): predict's outputs."""
        tensors = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if not all(isinstance(t, Tensor) for t in tensors):
            out = self.predict(inputs)
            return [o.view(EagerArray) for o in out] if isinstance(out, list) else \
                out.view(EagerArray)
        outs = run_spec(self.spec, self._objects, tensors, training)
        return outs[0] if len(outs) == 1 else outs

    def get_layer(self, name=None, index=None):
        """A layer by its Keras name (or its index in model.layers)."""
        return _get_layer(self, name, index)

    @property
    def weights(self) -> list:
        return [w for layer in self.layers for w in layer.weights]

    def summary(self, print_fn=print, line_length=88) -> None:
        """Keras's table: each layer's name and class, output shape and parameters, then
        the total, trainable and non-trainable parameters."""
        shapes = self._layer_shapes()
        rule = "─" * line_length
        print_fn(f'Model: "{self.name}"')
        print_fn("┏" + rule + "┓")
        print_fn(f"  {'Layer (type)':<45} {'Output Shape':<26}{'Param #':>12}")
        print_fn("┡" + rule + "┩")
        for layer in self.layers:
            kind = getattr(layer, "_keras_class", None) or getattr(layer, "class_name", None) \
                or type(layer).__name__
            print_fn(f"  {layer.name + ' (' + kind + ')':<45} "
                     f"{shapes.get(layer.name, '?'):<26}{layer.count_params():>12,}")
        print_fn("└" + rule + "┘")
        total = sum(math.prod(w.shape) for w in self.weights)
        trainable = sum(math.prod(w.shape) for w in self.trainable_weights)
        print_fn(f" Total params: {total:,}")
        print_fn(f" Trainable params: {trainable:,}")
        print_fn(f" Non-trainable params: {total - trainable:,}")

    def _layer_shapes(self) -> dict:
        """name -> the output shape of its first call (as the graph was built)."""
        shapes = {}
        for (name, node), outs in self.tensor_info.items():
            if node == 0 and outs and outs[0][0] is not None:
                text = [str(tuple(shape)) for shape, _ in outs]
                shapes[name] = text[0] if len(text) == 1 else "[" + ", ".join(text) + "]"
        return shapes

    def to_json(self, **kwargs) -> str:
        """The model's Keras 3 config as JSON (what keras.models.model_from_json reads)."""
        from .saving import model_json  # a cycle: saving reads KerasModel
        return model_json(self, **kwargs)

    def save(self, filepath, overwrite=True, **kwargs):
        """The model as a Keras 3 .keras file or a Keras .h5 file (by the suffix)."""
        from .saving import save_model  # a cycle: saving reads KerasModel
        save_model(self, filepath, overwrite=overwrite, **kwargs)

    # -- compile ------------------------------------------------------------------------
    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None):
        """Keras's compile: an optimizer (an ff.optim instance or a Keras name), a loss
        (one for every output, a list in output order or a dict by output name), metrics
        (a list for every output, or a list of lists / dict per output), loss_weights."""
        if loss is None:
            raise AttrError("compile needs a loss")
        self.optimizer = _lookup(OPTIMIZERS, optimizer, "optimizer")() \
            if isinstance(optimizer, str) else optimizer
        if not isinstance(self.optimizer, _optim.Optimizer):
            raise AttrError(f"optimizer must be an ff.optim optimizer or one of "
                            f"{', '.join(sorted(OPTIMIZERS))}, got {optimizer!r}")
        n = len(self.outputs)
        losses = self._per_output(loss, "loss")
        self._loss_fns = [_lookup(LOSSES, item, "loss") for item in losses]
        weights = [1.0] * n if loss_weights is None else \
            [float(w) for w in self._per_output(loss_weights, "loss_weights")]
        self._loss_weights = weights
        self.loss = self._loss_fns[0] if n == 1 else self._loss_fns
        if metrics is None:
            per_out = [[] for _ in range(n)]
        elif isinstance(metrics, dict) or (n > 1 and metrics and all(
                isinstance(m, (list, tuple)) or m is None for m in metrics)):
            per_out = [list(m or []) if isinstance(m, (list, tuple)) else [m]
                       for m in self._per_output(metrics, "metrics")]
        else:
            per_out = [list(metrics)] * n
        self._out_metrics = []
        for fn_loss, mets in zip(self._loss_fns, per_out):
            row = []
            for m in mets:
                if isinstance(m, str) and m.lower() in ("accuracy", "acc"):
                    row.append((m, ACCURACY_FOR_LOSS.get(fn_loss)))
                else:
                    row.append((m if isinstance(m, str) else m.__name__,
                                _lookup(METRICS, m, "metric")))
            self._out_metrics.append(row)
        self.metrics_names = self._log_names()[1:]
        self._train = self._eval = None
        self.optimizer_state = None    # a new optimizer starts afresh, as in Keras

    def _per_output(self, value, what) -> list:
        n = len(self.outputs)
        if isinstance(value, dict):
            unknown = set(value) - set(self.output_names)
            if unknown:
                raise AttrError(f"compile: {what} names {sorted(unknown)}, not outputs of "
                                f"model '{self.name}' ({self.output_names})")
            return [value.get(name) for name in self.output_names]
        if isinstance(value, (list, tuple)) and not (what == "metrics" and n == 1):
            if len(value) != n:
                raise AttrError(f"compile: {what} has {len(value)} entries for "
                                f"{n} outputs")
            return list(value)
        return [value] * n

    def _log_names(self) -> list:
        names = ["loss"]
        many = len(self.outputs) > 1
        if many:
            names += [f"{out}_loss" for out in self.output_names]
        for out, row in zip(self.output_names, self._out_metrics):
            names += [f"{out}_{m}" if many else m for m, _ in row]
        return names

    def _sparse(self, k) -> bool:
        fn = self._loss_fns[k]
        return fn is sparse_categorical_crossentropy or getattr(fn, "sparse_labels", False)

    def _ensure_training(self):
        if self.optimizer is None or not self._loss_fns:
            raise FragflowError(f"model '{self.name}' is not compiled: call compile("
                                f"optimizer, loss, metrics) first")
        if self._train is not None:
            return
        leaves = list(leaf_layers(self.layers))
        with self.graph.as_default():
            labels = []
            for k, out in enumerate(self.outputs):
                if self._sparse(k):
                    labels.append(_ops.placeholder(tuple(out.shape[:-1]), "int32",
                                                   name=f"labels_{k}"))
                else:
                    labels.append(_ops.placeholder(tuple(out.shape), "float32",
                                                   name=f"labels_{k}"))
            with _ops.name_scope("training"):
                before = [len(layer.updates) for layer in leaves]
                outs = run_spec(self.spec, self._objects, self.inputs, True) \
                    if any(_training_dependent(layer) for layer in leaves) else self.outputs
                train_vals, total = self._losses(labels, outs)
                updates = [u for layer, n in zip(leaves, before) for u in layer.updates[n:]]
                step = self.optimizer.minimize(total, var_list=self.trainable_weights)
                op = _optim.group(step, *updates, name="train_op")
            self._restore_optimizer_state()
            with _ops.name_scope("evaluation"):
                eval_vals, _ = self._losses(labels, self.outputs, per_batch=False)
        self.labels = labels
        self.train_op, self.total_loss = op, total
        self._train = [op, total, *train_vals]
        self._eval = eval_vals

    def _restore_optimizer_state(self):
        """The file's optimizer variables into fragflow's optimizer, once its slots
        exist: Keras's [iteration, learning_rate, then per trainable weight its slots]
        (SGD with momentum: momentum; Adam: momentum, velocity). Keras's SGD momentum m
        (w += m) is TF1's accumulator a (w -= lr * a) as a = -m / lr; Adam's m and v are
        the same, and TF1's beta powers are beta ** (iteration + 1)."""
        state, self.optimizer_state = self.optimizer_state, None
        opt = self.optimizer
        if not state:
            return
        slots = {_optim.Momentum: ["momentum"], _optim.Adam: ["m", "v"]}.get(type(opt))
        weights = self.trainable_weights
        if slots is None:
            slots = []
        if len(state) != 2 + len(slots) * len(weights) or state[0].size != 1:
            if len(state) > 2:
                warnings.warn(f"model '{self.name}': the file's optimizer state ("
                              f"{len(state)} variables) does not fit {type(opt).__name__} "
                              f"on {len(weights)} weights; it starts afresh", stacklevel=3)
            return
        steps = int(state[0].reshape(()))
        session = self.session
        if opt.iterations is not None:
            session.set(opt.iterations, np.int32(steps))
        lr = float(opt._learning_rate)
        for k, var in enumerate(weights):
            for j, slot in enumerate(slots):
                value = state[2 + k * len(slots) + j]
                if tuple(value.shape) != tuple(var.shape):
                    warnings.warn(f"model '{self.name}': the file's optimizer state does "
                                  f"not fit weight '{var.op.name}'; it starts afresh",
                                  stacklevel=3)
                    return
                if slot == "momentum":
                    value = -value / lr if lr else value * 0
                session.set(opt._slot(var, slot), np.asarray(value, np.float32))
        if isinstance(opt, _optim.Adam):
            session.set(opt._non_slot["beta1_power"], np.float32(opt._beta1 ** (steps + 1)))
            session.set(opt._non_slot["beta2_power"], np.float32(opt._beta2 ** (steps + 1)))

    def _losses(self, labels, outs, per_batch=True):
        """([per-output losses (several outputs), metrics...], total loss): batch means
        when per_batch, else one value per example."""
        reduce = _ops.mean if per_batch else (lambda t: t)
        losses, metrics = [], []
        for k, (y, out) in enumerate(zip(labels, outs)):
            losses.append(reduce(per_example(self._loss_fns[k], y, out, "loss")))
            for _, fn in self._out_metrics[k]:
                fn = fn or (sparse_categorical_accuracy if self._sparse(k) else
                            binary_accuracy if out.shape[-1] == 1 else categorical_accuracy)
                metrics.append(reduce(per_example(fn, y, out, "metric")))
        total = losses[0] * self._loss_weights[0] if self._loss_weights[0] != 1.0 \
            else losses[0]
        for loss, w in zip(losses[1:], self._loss_weights[1:]):
            total = total + (loss * w if w != 1.0 else loss)
        penalty = regularization_loss(self.layers) if per_batch else None
        if penalty is not None:          # Keras's loss includes the regularizers' penalties
            total = total + penalty
        values = ([total] + losses if len(losses) > 1 else [total]) + metrics
        return (values[1:] if per_batch else values), total

    # -- data ---------------------------------------------------------------------------
    def _xs(self, x) -> list:
        """x (an array, a list in input order, or a dict by input name) as arrays."""
        if isinstance(x, dict):
            missing = [n for n in self.input_names if n not in x]
            if missing:
                raise ShapeError(f"model '{self.name}': no data for input(s) {missing}")
            x = [x[n] for n in self.input_names]
        elif len(self.inputs) == 1:
            x = list(x) if isinstance(x, (list, tuple)) and len(x) == 1 and \
                isinstance(x[0], np.ndarray) else [x]
        if len(x) != len(self.inputs):
            raise ShapeError(f"model '{self.name}' has {len(self.inputs)} inputs, got "
                             f"{len(x)} arrays")
        out = []
        for t, v in zip(self.inputs, x):
            v = np.asarray(v)
            out.append(v.astype({"int32": np.int32, "bool": np.bool_}.get(t.dtype,
                                                                          np.float32)))
        n = {len(v) for v in out}
        if len(n) != 1:
            raise ShapeError(f"model '{self.name}': the inputs hold different numbers of "
                             f"examples {sorted(n)}")
        return out

    def _ys(self, y) -> list:
        if isinstance(y, dict):
            y = [y[n] for n in self.output_names]
        elif len(self.outputs) == 1:
            y = [y]
        if len(y) != len(self.outputs):
            raise ShapeError(f"model '{self.name}' has {len(self.outputs)} outputs, got "
                             f"{len(y)} label arrays")
        out = []
        for k, (t, v) in enumerate(zip(self.outputs, y)):
            v = np.asarray(v)
            if self._sparse(k):
                v = v.reshape(len(v)).astype(np.int32) if v.ndim == 2 and v.shape[1] == 1 \
                    and len(t.shape) == 2 else v.astype(np.int32)
            else:
                shape = tuple(t.shape[1:])
                if math.prod(v.shape[1:]) == math.prod(shape):
                    v = v.reshape((len(v),) + shape)
                v = v.astype(np.float32)
            out.append(v)
        return out

    # -- running ------------------------------------------------------------------------
    def predict(self, x, batch_size=None, verbose=0):
        """The outputs for x: an array, or a list of arrays for several outputs."""
        xs = self._xs(x)
        n = len(xs[0])
        if n == 0:
            raise ShapeError("predict needs at least one example")
        run = self.session.compile(list(self.outputs), feeds=list(self.inputs))
        outs = predict_batches(run, xs, batch_size, len(self.outputs))
        return outs[0] if len(outs) == 1 else outs

    def fit(self, x, y, batch_size=None, epochs=1, verbose=1, callbacks=None,
            validation_data=None, validation_split=0.0, shuffle=True, initial_epoch=0,
            seed=None) -> History:
        """Keras's fit (see Sequential.fit): mean losses and metrics per epoch."""
        xs, ys = self._xs(x), None
        self._ensure_training()
        ys = self._ys(y)
        n = len(xs[0])
        if any(len(v) != n for v in ys):
            raise ShapeError(f"fit: x has {n} examples but y has {[len(v) for v in ys]}")
        if validation_split and validation_data is None:
            cut = n - int(n * validation_split)
            validation_data = ([a[cut:] for a in xs], [v[cut:] for v in ys])
            xs, ys, n = [a[:cut] for a in xs], [v[:cut] for v in ys], cut
        if n == 0:
            raise ShapeError("fit needs at least one example")
        run = self.session.compile(self._train, feeds=[*self.inputs, *self.labels])
        return fit_loop(self, run, [*xs, *ys], self._log_names(), batch_size, epochs,
                        verbose, callbacks, validation_data, shuffle, initial_epoch, seed)

    def train_on_batch(self, x, y):
        xs = self._xs(x)
        self._ensure_training()
        run = self.session.compile(self._train, feeds=[*self.inputs, *self.labels])
        values = [float(v) for v in run(*xs, *self._ys(y))[1:]]
        return values[0] if len(values) == 1 else values

    def evaluate(self, x, y, batch_size=None, verbose=0, return_dict=False):
        """The loss (and per-output losses and metrics) over (x, y) in inference mode."""
        xs = self._xs(x)
        self._ensure_training()
        ys = self._ys(y)
        n = len(xs[0])
        if n == 0 or any(len(v) != n for v in ys):
            raise ShapeError(f"evaluate: x has {n} examples and y {[len(v) for v in ys]}")
        run = self.session.compile(self._eval, feeds=[*self.inputs, *self.labels])
        results = evaluate_means(run, [*xs, *ys], batch_size, len(self._eval))
        names = self._log_names()
        if return_dict:
            return dict(zip(names, results))
        return results[0] if len(results) == 1 else results

    def __repr__(self):
        return f"<ff.keras {self.class_name} '{self.name}': {len(self.layers)} layers>"
