"""ff.Sequential: a stack of ff.layers with Keras's compile / fit / evaluate / predict.

The model owns a graph (model.graph) and a Session on it (model.session, backend "gl"
or "numpy"). It builds the inference ops once and the training ops at the first fit,
and every batch a run sees has the same size (one compiled plan serves a whole fit):
docs/TENSORFLOW.md ("Keras layers and models"). compile's docstring lists the losses
and metrics.

>>> import fragflow as ff, numpy as np
>>> x = np.random.default_rng(0).normal(size=(64, 2)).astype(np.float32)
>>> y = (x[:, 0] > x[:, 1]).astype(np.int32)
>>> ff.initializers.set_seed(0)
>>> model = ff.Sequential([ff.layers.Dense(8, activation="relu"),
...                        ff.layers.Dense(2, activation="softmax")], backend="numpy")
>>> model.compile(ff.optim.Adam(0.05), "sparse_categorical_crossentropy", ["accuracy"])
>>> history = model.fit(x, y, batch_size=16, epochs=20, verbose=0, seed=0)
>>> history.history["loss"][-1] < history.history["loss"][0]
True
>>> model.predict(x[:3]).shape
(3, 2)
"""
from __future__ import annotations

import math
import sys

import numpy as np

from ...ir.errors import AttrError, FragflowError, SerializationError, ShapeError
from ...ir.graph import Graph
from .. import ops as _ops, optim as _optim
from ..layers import CALLS, BatchNormalization, Dropout, Layer, regularization_loss
from ..session import Session
from ..tensor import Tensor
from .losses import LOSSES, sparse_categorical_crossentropy
from .metrics import (
    ACCURACY_FOR_LOSS,
    METRICS,
    binary_accuracy,
    categorical_accuracy,
    per_example,
    sparse_categorical_accuracy,
)
from .progress import History, ProgressBar
from .training import evaluate_means, fit_loop, predict_batches

__all__ = ["Sequential", "Model", "Input"]

OPTIMIZERS = {      # Keras's string names, with Keras's default learning rates
    "sgd": lambda: _optim.SGD(0.01), "adam": lambda: _optim.Adam(0.001),
    "rmsprop": lambda: _optim.RMSProp(0.001), "adagrad": lambda: _optim.Adagrad(0.001),
    "adadelta": lambda: _optim.Adadelta(0.001), "adamax": lambda: _optim.Adamax(0.001),
}


def _lookup(table, identifier, what):
    if callable(identifier):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in table:
        return table[identifier.lower()]
    raise AttrError(f"unknown {what} {identifier!r}; use one of "
                    f"{', '.join(sorted(table))} or a function (y_true, y_pred)")


# -- the model ---------------------------------------------------------------------------
class Sequential:
    """Layers applied in order. See the module docstring for what it builds and runs.

    backend: "gl" (default) or "numpy", the Session the model runs on.
    graph: the graph to build in (default: a new one, named after the model)."""

    def __init__(self, layers=None, name="sequential", backend="gl", graph=None):
        self.name = name
        self.graph = graph if graph is not None else Graph(name)
        self.backend = backend
        self.layers: list = []
        self.input = self.output = None
        self.optimizer = self.loss = None
        self.metrics_names: list = []
        self.history = None
        self._session = None
        self._metric_fns: list = []
        self._train = self._eval = None
        for layer in layers or []:
            self.add(layer)

    # -- structure ------------------------------------------------------------------
    def add(self, layer):
        if isinstance(layer, Sequential):
            self._add_model(layer)
            return
        if not isinstance(layer, Layer):
            raise AttrError(f"Sequential holds ff.layers, got {layer!r}")
        if self.input is not None:
            raise FragflowError(f"model '{self.name}' is already built; add layers first")
        self.layers.append(layer)

    def _add_model(self, model):
        """A model as the first layer (Keras's Sequential([model, Softmax()])): this one
        is built in that model's graph and runs in its session, so it uses the trained
        weights."""
        if self.layers or self.input is not None:
            raise FragflowError(f"model '{self.name}': a model can only be the first "
                                f"layer of a Sequential")
        if model.input is None:
            raise FragflowError(f"model '{model.name}' is not built yet: call it, build "
                                f"or fit it before putting it in another model")
        self.graph = model.graph
        self._session_of = model
        self._inner = model
        self.layers = []

    def _built_from_model(self) -> bool:
        return getattr(self, "_inner", None) is not None

    def build(self, input_shape):
        """Make the inference ops (and every weight) for inputs of input_shape, the
        batch dimension first (None: any)."""
        if self.input is not None:
            return
        if self._built_from_model():
            with self.graph.as_default():
                self.input, x = self._inner.input, self._inner.output
                self._output_shapes = []
                for layer in self.layers:
                    x = layer(x, training=False)
                    self._output_shapes.append(tuple(x.shape))
                self.output = x
            return
        if not self.layers:
            raise FragflowError(f"model '{self.name}' has no layers")
        with self.graph.as_default():
            self.input = x = _ops.placeholder(tuple(input_shape), "float32", name="input")
            self._output_shapes = []
            for layer in self.layers:
                x = layer(x, training=False)
                self._output_shapes.append(tuple(x.shape))
            self.output = x

    def __call__(self, inputs, training=False):
        """The layers applied to a tensor (training selects Dropout's and
        BatchNormalization's behaviour); the weights are shared with the model's ops.
        On an array (TF2's eager `model(x_train[:1])`), the model's outputs for it, as
        predict gives them (an array with .numpy())."""
        if not isinstance(inputs, Tensor):
            return self.predict(inputs).view(EagerArray)
        if self._built_from_model():
            x = self._inner(inputs, training=training)
        else:
            if self.input is None and not self.graph.nodes and \
                    inputs.graph is not self.graph and all(not la.built for la in self.layers):
                self.graph = inputs.graph     # TF1-style use: build where it is called
            x = inputs
        for layer in self.layers:
            x = layer(x, training=training)
        return x

    def _as_input(self, x) -> np.ndarray:
        """x as the model's input takes it: float32, or the dtype its Input declares
        (token ids for an Embedding as int32), as Keras casts to its inputs' dtypes."""
        x = np.asarray(x)
        self._ensure_built(x)
        dtype = getattr(self.input, "dtype", "float32")
        return x.astype({"int32": np.int32, "bool": np.bool_}.get(str(dtype), np.float32))

    def _ensure_built(self, x):
        if self.input is None and self._built_from_model():
            self.build(None)
        if self.input is None:
            first = self.layers[0].input_shape if self.layers else None
            self.build((None,) + (tuple(first) if first is not None else x.shape[1:]))

    @property
    def session(self) -> Session:
        """The Session holding this model's variables (made on first use)."""
        if self._session is None:
            owner = getattr(self, "_session_of", None)
            self._session = owner.session if owner is not None else \
                Session(self.graph, backend=self.backend)
        return self._session

    @property
    def weights(self) -> list:
        inner = self._inner.weights if self._built_from_model() else []
        return inner + [w for layer in self.layers for w in layer.weights]

    @property
    def trainable_weights(self) -> list:
        return [w for layer in self.layers for w in layer.trainable_weights]

    @property
    def non_trainable_weights(self) -> list:
        return [w for layer in self.layers for w in layer.non_trainable_weights]

    def count_params(self) -> int:
        return sum(layer.count_params() for layer in self.layers)

    def get_weights(self) -> list:
        """Every layer weight's current value (numpy arrays, in self.weights' order)."""
        return [self.session.get(w) for w in self.weights]

    def set_weights(self, values) -> None:
        for w, v in zip(self.weights, values, strict=True):
            self.session.set(w, v)

    def save_weights(self, path) -> None:
        """The layers' weights to an .npz, keyed by variable name (no pickle). The
        optimizer's state is not included: model.session.save(path) saves every
        variable of the graph."""
        np.savez(path, **{w.op.name: self.session.get(w) for w in self.weights})

    def load_weights(self, path) -> None:
        """Weights written by save_weights (of a model built the same way: the names
        must match)."""
        by_name = {w.op.name: w for w in self.weights}
        try:
            data = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise SerializationError(f"cannot read weights {path!r}: {err}") from None
        with data:
            missing = sorted(set(by_name) - set(data.files))
            extra = sorted(set(data.files) - set(by_name))
            if missing or extra:
                raise SerializationError(
                    f"weights {path!r} do not fit model '{self.name}': missing "
                    f"{missing or 'none'}, unknown {extra or 'none'} (build the model "
                    f"first, with the same layers)")
            for name, w in by_name.items():
                self.session.set(w, data[name])

    def save(self, filepath, overwrite=True, **kwargs):
        """The model as a Keras 3 .keras file or a Keras .h5 file (by the suffix), which
        keras.models.load_model and ff.keras.models.load_model open (docs/KERAS.md)."""
        from ..keras_files import save_model  # a cycle: keras_files builds on this module
        save_model(self, filepath, overwrite=overwrite, **kwargs)

    def to_json(self, **kwargs) -> str:
        """The model's Keras config as JSON (keras.models.model_from_json reads it)."""
        from ..keras_files import model_json  # a cycle: keras_files builds on models
        return model_json(self, **kwargs)

    def summary(self, print_fn=print) -> None:
        """A table of the layers: name, type, output shape, parameters."""
        if self.input is None:
            raise FragflowError(f"model '{self.name}' is not built yet: call build, fit "
                                f"or predict first")
        print_fn(f'Model: "{self.name}"')
        for layer, shape in zip(self.layers, self._output_shapes):
            print_fn(f"  {layer.name + ' (' + type(layer).__name__ + ')':<48}"
                     f"{str(shape):<24}{layer.count_params()}")
        print_fn(f"Total params: {self.count_params()}")

    # -- training setup -------------------------------------------------------------------
    def compile(self, optimizer="rmsprop", loss=None, metrics=None):
        """Choose the optimizer (an ff.optim instance or a Keras name), the loss and the
        metrics. The training ops are built at the first fit.

        Losses (Keras's names): "sparse_categorical_crossentropy" (int labels),
        "categorical_crossentropy" (one-hot), "binary_crossentropy", "mean_squared_error"
        ("mse"), "mean_absolute_error" ("mae"), or a function (y_true, y_pred) -> one loss
        per example. As in Keras, a cross-entropy on the output of a softmax (sigmoid)
        layer is computed from that layer's logits, which is exact where the
        probabilities round to 0. Metrics: "accuracy" ("acc", chosen to fit the loss),
        "sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy", the loss
        names above, or functions."""
        if loss is None:
            raise AttrError("compile needs a loss")
        self.optimizer = _lookup(OPTIMIZERS, optimizer, "optimizer")() \
            if isinstance(optimizer, str) else optimizer
        if not isinstance(self.optimizer, _optim.Optimizer):
            raise AttrError(f"optimizer must be an ff.optim optimizer or one of "
                            f"{', '.join(sorted(OPTIMIZERS))}, got {optimizer!r}")
        self.loss = _lookup(LOSSES, loss, "loss")
        self._metric_fns, self.metrics_names = [], []
        for m in metrics or []:
            if isinstance(m, str) and m.lower() in ("accuracy", "acc"):
                fn = ACCURACY_FOR_LOSS.get(self.loss)
            else:
                fn = _lookup(METRICS, m, "metric")
            self._metric_fns.append(fn)
            self.metrics_names.append(m if isinstance(m, str) else m.__name__)
        self._train = self._eval = None

    def _labels(self, y) -> np.ndarray:
        """y as the labels placeholder wants it."""
        y = np.asarray(y)
        if self._sparse_labels():
            return y.reshape(len(y)).astype(np.int32) if y.ndim == 2 and y.shape[1] == 1 \
                else y.astype(np.int32)
        shape = tuple(self.output.shape[1:])
        if y.ndim == len(shape) and math.prod(y.shape[1:]) == math.prod(shape):
            y = y.reshape((len(y),) + shape)          # (N,) labels for an (N, 1) output
        return y.astype(np.float32)

    def _sparse_labels(self) -> bool:
        return self.loss is sparse_categorical_crossentropy or \
            getattr(self.loss, "sparse_labels", False)

    def _ensure_training(self):
        if self.optimizer is None:
            raise FragflowError(f"model '{self.name}' is not compiled: call compile("
                                f"optimizer, loss, metrics) first")
        if self._train is not None:
            return
        g = self.graph
        with g.as_default():
            if self._sparse_labels():
                labels = _ops.placeholder(tuple(self.output.shape[:-1]), "int32",
                                          name="labels")
                # a metric guessed for an unknown loss: sparse labels -> sparse accuracy
            else:
                labels = _ops.placeholder(tuple(self.output.shape), "float32",
                                          name="labels")
            metric_fns = [fn if fn is not None else
                          (sparse_categorical_accuracy if self._sparse_labels() else
                           binary_accuracy if self.output.shape[-1] == 1 else
                           categorical_accuracy) for fn in self._metric_fns]
            with _ops.name_scope("evaluation"):
                # the layers' regularizers, added to the loss as Keras adds them (the
                # activity penalties of the inference ops here, of the training ops
                # below)
                eval_penalty = regularization_loss(self.layers)
            with _ops.name_scope("training"):
                before = [len(layer.updates) for layer in self.layers]
                # layers that train as they infer (no Dropout, no BatchNormalization)
                # share the inference ops: one forward pass in the graph, not two
                out = self(self.input, training=True) \
                    if any(_training_dependent(layer) for layer in self.layers) \
                    else self.output
                loss = _ops.mean(per_example(self.loss, labels, out, "loss"))
                penalty = regularization_loss(self.layers)
                if penalty is not None:
                    loss = loss + penalty
                metrics = [_ops.mean(per_example(fn, labels, out, "metric"))
                           for fn in metric_fns]
                updates = [u for layer, n in zip(self.layers, before)
                           for u in layer.updates[n:]]
                step = self.optimizer.minimize(loss, var_list=self.trainable_weights)
                op = _optim.group(step, *updates, name="train_op")
            with _ops.name_scope("evaluation"):
                eval_loss = per_example(self.loss, labels, self.output, "loss")
                if eval_penalty is not None:
                    eval_loss = eval_loss + eval_penalty
                eval_metrics = [per_example(fn, labels, self.output, "metric")
                                for fn in metric_fns]
        self.labels = labels
        self.train_op, self.total_loss = op, loss
        self._train = [op, loss, *metrics]
        self._eval = [eval_loss, *eval_metrics]

    # -- running --------------------------------------------------------------------------
    def fit(self, x, y, batch_size=None, epochs=1, verbose=1, callbacks=None,
            validation_data=None, validation_split=0.0, shuffle=True, initial_epoch=0,
            seed=None) -> History:
        """Train for epochs over (x, y) in batches of batch_size (default 32), shuffled
        each epoch (seed: the shuffling's numpy seed). verbose: 0 silent, 1 a progress
        bar on stderr, 2 one line per epoch. validation_data (x_val, y_val), or the
        last validation_split of the data, is evaluated after each epoch. Returns a
        History of the mean loss and metrics per epoch (and "val_" ones). callbacks:
        ff.keras.callbacks (TensorBoard, EarlyStopping, ...), told of each epoch's logs."""
        x = self._as_input(x)
        if len(x) != len(y):
            raise ShapeError(f"fit: x has {len(x)} examples but y has {len(y)}")
        if validation_split and validation_data is None:
            cut = len(x) - int(len(x) * validation_split)
            x, y, validation_data = x[:cut], y[:cut], (x[cut:], y[cut:])
        n = len(x)
        if n == 0:
            raise ShapeError("fit needs at least one example")
        self._ensure_built(x)
        self._ensure_training()
        y = self._labels(y)
        run = self.session.compile(self._train, feeds=[self.input, self.labels])
        return fit_loop(self, run, [x, y], ["loss", *self.metrics_names], batch_size,
                        epochs, verbose, callbacks, validation_data, shuffle,
                        initial_epoch, seed)

    def train_on_batch(self, x, y):
        """One training step on exactly this batch: [loss, *metrics] before the step
        (the loss alone without metrics)."""
        x = self._as_input(x)
        self._ensure_built(x)
        self._ensure_training()
        run = self.session.compile(self._train, feeds=[self.input, self.labels])
        values = [float(v) for v in run(x, self._labels(y))[1:]]
        return values[0] if len(values) == 1 else values

    def evaluate(self, x, y, batch_size=None, verbose=0, return_dict=False):
        """The loss and metrics over (x, y) in inference mode: the loss alone if there
        are no metrics, else [loss, *metrics] (a dict with return_dict)."""
        x = self._as_input(x)
        if len(x) != len(y) or len(x) == 0:
            raise ShapeError(f"evaluate: x has {len(x)} examples and y {len(y)}")
        self._ensure_built(x)
        self._ensure_training()
        y = self._labels(y)
        run = self.session.compile(self._eval, feeds=[self.input, self.labels])
        results = evaluate_means(run, [x, y], batch_size, len(self._eval))
        names = ["loss", *self.metrics_names]
        if verbose:
            sys.stderr.write(ProgressBar._format(dict(zip(names, results))) + "\n")
        if return_dict:
            return dict(zip(names, results))
        return results[0] if len(results) == 1 else results

    def predict(self, x, batch_size=None, verbose=0) -> np.ndarray:
        """The model's outputs (inference mode) for x, batch by batch."""
        x = self._as_input(x)
        if len(x) == 0:
            raise ShapeError("predict needs at least one example")
        self._ensure_built(x)
        run = self.session.compile([self.output], feeds=[self.input])
        return predict_batches(run, [x], batch_size, 1)[0]

    def __repr__(self):
        return f"<ff.Sequential '{self.name}': {len(self.layers)} layers>"


class EagerArray(np.ndarray):
    """A numpy array with TF2's EagerTensor.numpy(): what calling a model on an array
    gives."""

    def numpy(self) -> np.ndarray:
        return np.asarray(self)


# -- Keras's functional API ----------------------------------------------------------------
def Input(shape, batch_size=None, name=None, dtype="float32"):  # noqa: N802 (Keras's name)
    """A placeholder of shape (batch_size, *shape) in the default graph, to call layers
    on (keras.Input); ff.Model(inputs, outputs) then trains and runs them."""
    return _ops.placeholder((batch_size,) + tuple(shape), dtype, name=name or "input")


class Model(Sequential):
    """Keras's functional API: layers called on tensors, from ff.keras.Input to an
    output, made into a model with compile / fit / evaluate / predict / summary.

    >>> import fragflow as ff, numpy as np
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     inputs = ff.keras.Input(shape=(4,))
    ...     h = ff.layers.Dense(8, activation="relu")(inputs)
    ...     outputs = ff.layers.Dense(2, activation="softmax")(h)
    >>> model = ff.Model(inputs, outputs, backend="numpy")
    >>> model.predict(np.zeros((3, 4), np.float32)).shape
    (3, 2)

    One input and one output tensor. Training builds the layers again with
    training=True (Dropout, BatchNormalization) when the output is a chain of layer
    calls from the input; ops between layers (ff.nn.relu(h), ...) are allowed when no
    layer behaves differently in training."""

    def __init__(self, inputs=None, outputs=None, name="model", backend="gl"):
        inputs = inputs[0] if isinstance(inputs, (list, tuple)) and len(inputs) == 1 \
            else inputs
        outputs = outputs[0] if isinstance(outputs, (list, tuple)) and len(outputs) == 1 \
            else outputs
        if not isinstance(inputs, Tensor) or not isinstance(outputs, Tensor):
            raise AttrError("ff.Model(inputs, outputs) needs one input tensor (from "
                            "ff.keras.Input) and one output tensor")
        if inputs.op.op != "placeholder":
            raise AttrError(f"ff.Model: inputs must be a placeholder (ff.keras.Input), "
                            f"got {inputs!r}")
        if inputs.graph is not outputs.graph:
            raise FragflowError("ff.Model: inputs and outputs belong to different graphs")
        super().__init__(None, name=name, backend=backend, graph=inputs.graph)
        self.input, self.output = inputs, outputs
        calls = self._layer_calls()
        self.layers = list(dict.fromkeys(layer for layer, _ in calls))
        self._output_shapes = [tuple(out.shape) for _, out in
                               {layer: out for layer, out in calls}.items()]
        self._chain = self._layer_chain()

    def add(self, layer):
        raise FragflowError("a functional ff.Model is built from its inputs and outputs; "
                            "it has no add()")

    def _layer_calls(self) -> list:
        """(layer, output value) of every layer call between input and output, in the
        order the calls were made."""
        recorded = CALLS.get(self.graph, {})
        seen, stack = set(), [self.output.value]
        while stack:
            value = stack.pop()
            if value in seen or value is self.input.value:
                continue
            seen.add(value)
            stack.extend(value.node.inputs)
        order = {node: i for i, node in enumerate(self.graph.nodes)}
        calls = [(i, layer, value) for value, entries in recorded.items() if value in seen
                 for i, (layer, _) in enumerate(entries)]
        calls.sort(key=lambda c: (order.get(c[2].node, 0), c[0]))
        return [(layer, value) for _, layer, value in calls]

    def _layer_chain(self):
        """The layers from input to output when the output is a chain of layer calls
        (each on the previous one's output), else None."""
        recorded = CALLS.get(self.graph, {})
        chain, value = [], self.output.value
        used: dict = {}          # value -> how many of its recorded calls the walk took
        while value is not self.input.value:
            entries = recorded.get(value, [])
            taken = used.get(value, 0)
            if taken >= len(entries):
                return None
            used[value] = taken + 1
            layer, value = entries[len(entries) - 1 - taken]   # the latest call first
            chain.append(layer)
        return chain[::-1]

    def build(self, input_shape):
        pass                                # built by the calls that made outputs

    def __call__(self, inputs, training=False):
        if self._chain is not None:
            x = inputs
            for layer in self._chain:
                x = layer(x, training=training)
            return x
        if inputs is not self.input:
            raise FragflowError(f"model '{self.name}' is not a chain of layer calls; it "
                                f"can only run on its own input")
        if training and any(_training_dependent(layer) for layer in self.layers):
            raise FragflowError(
                f"model '{self.name}' has layers that train differently (Dropout, "
                f"BatchNormalization) and ops between its layers; fragflow can rebuild "
                f"only a chain of layer calls with training=True")
        return self.output

    def __repr__(self):
        return f"<ff.Model '{self.name}': {len(self.layers)} layers>"


def _training_dependent(layer) -> bool:
    return isinstance(layer, (BatchNormalization, Dropout)) or \
        bool(getattr(layer, "training_dependent", False))     # RNNs with dropout, noise
