"""ff.optim: TensorFlow 1's optimizers (tf.compat.v1.train.*Optimizer) as graph ops,
with its argument names, defaults and update formulas (its training_ops kernels',
written out with each class). Slots and state (moments, Adam's beta powers, the step
counter) are ff.Variables, kept in textures between runs on GL.

`step = ff.optim.Adam(1e-3).minimize(loss)` is one tensor depending on every assign of
the step (`group`): fetching it applies them all in the run; its value is the step
count after the update (`opt.iterations`). Reads see a variable's value from the start
of the run and assigns apply at its end: fetch [loss, step] for the loss before the
update, and at most one step op per optimizer per run.

>>> import fragflow as ff, numpy as np
>>> g = ff.Graph()
>>> with g.as_default():
...     w = ff.Variable(np.float32([1.0, -2.0]), name="w")
...     step = ff.optim.SGD(0.25).minimize(ff.sum(ff.square(w)))
>>> sess = ff.Session(g, backend="numpy")
>>> int(sess.run(step)), sess.get(w)
(1, array([ 0.5, -1. ], dtype=float32))
"""
from __future__ import annotations

import itertools

import numpy as np

from ..ir.errors import AttrError, GradientError
from ..ir.graph import Value, get_default_graph
from ..ir.ops.common import apply
from . import ops as _ops
from .gradients import gradients
from .tensor import Tensor, Variable, wrap

__all__ = ["Optimizer", "SGD", "GradientDescent", "Momentum", "Adagrad", "Adadelta", "Adam",
           "Adamax", "RMSProp", "group", "with_dependencies", "trainable_variables"]

_group_keys = itertools.count()


# -- grouping ------------------------------------------------------------------------
def with_dependencies(dependencies, output_tensor, name=None) -> Tensor:
    """output_tensor, as a tensor whose fetch also computes every tensor in
    dependencies (TensorFlow 1's control_flow_ops.with_dependencies, as a data edge).

    fragflow graphs have no control edges, so this is the one view op that takes extra
    inputs: custom_gradient(output, *dependencies), which is output itself (no kernel
    runs) and passes no gradient to the dependencies. A dedicated ir `group` op would
    say the same thing by name."""
    output = output_tensor.value
    deps = [d.value if isinstance(d, Tensor) else d for d in dependencies]
    graph = output.graph
    # in a loop's body or a branch, outer values are seen through captures
    deps = [graph.capture(d) if isinstance(d, Value) and graph.parent_of(d.graph) else d
            for d in deps]
    for d in deps:
        if not isinstance(d, Value) or d.graph is not output.graph:
            raise GradientError(f"with_dependencies: {d!r} is not a tensor of graph "
                                f"'{output.graph.name}'")
    if not deps:
        return output_tensor
    key = f"ff.optim.group_{next(_group_keys)}"
    count = len(deps)
    output.graph.custom_gradients[key] = lambda dy: [None] * count
    return wrap(apply("custom_gradient", [output, *deps], {"key": key}, name or "group"))


def group(*tensors, name=None) -> Tensor:
    """One tensor whose fetch computes all of tensors (assign ops, typically); its value
    is the first one's. tf.group returns an Operation; this returns a tensor, because a
    fetch is how a fragflow Session runs anything."""
    flat = [t for t in tensors if t is not None]
    if not flat:
        raise GradientError("group needs at least one tensor")
    return with_dependencies(flat[1:], flat[0], name=name)


def trainable_variables(loss) -> list:
    """The trainable float32 Variables that loss depends on, in creation order (the
    default var_list of compute_gradients and minimize); not those made with
    trainable=False (optimizer slots, BatchNormalization's moving statistics)."""
    seen, stack = set(), [loss.value]
    while stack:
        node = stack.pop().node
        if node in seen:
            continue
        seen.add(node)
        stack.extend(node.inputs)
    from .variables import is_trainable  # variables.py imports this module
    found = [Variable(n.outputs[0]) for n in loss.graph.nodes
             if n in seen and n.op == "variable" and n.outputs[0].dtype == "float32"]
    return [v for v in found if is_trainable(v)]


def _one_minus(x):
    """1 - x as TensorFlow's kernels compute it: in float32, from a float32 x (for x
    near 1, as beta2 = 0.999, this differs from the float64 1 - x by ~1e-5 relative)."""
    if isinstance(x, Tensor):
        return 1.0 - x
    return np.float32(1) - np.float32(x)


# -- the optimizer interface ---------------------------------------------------------
class Optimizer:
    """Base class: subclasses define _create_slots(var) and _apply_dense(grad, var) ->
    [assign ops], and may define _finish() -> [assign ops] for non-slot state."""

    def __init__(self, learning_rate, use_locking=False, name="Optimizer"):
        if isinstance(learning_rate, (int, float, np.number)) and learning_rate < 0:
            raise AttrError(f"{name}: learning_rate must be >= 0, got {learning_rate}")
        self._learning_rate = learning_rate
        self._name = name
        self._graph = None
        self._slots: dict = {}          # slot name -> {variable node name: Variable}
        self._non_slot: dict = {}       # name -> Variable
        self.iterations = None          # int32 Variable: steps applied, made on first use

    def get_name(self) -> str:
        return self._name

    # -- public API -----------------------------------------------------------------
    def compute_gradients(self, loss, var_list=None) -> list:
        """[(gradient, variable)] for var_list (default: every float32 Variable loss
        depends on). A variable loss does not depend on gets None."""
        if not isinstance(loss, Tensor):
            raise GradientError(f"{self._name}: the loss must be a tensor, got {loss!r}")
        if loss.value.graph.parent is not None:
            raise GradientError(
                f"{self._name}: '{loss.name}' ({loss.value.node.source}) is computed inside "
                f"a loop's body or a branch; gradients with respect to variables there are "
                f"not supported: compute them outside (of the loop's result) and apply them "
                f"inside with apply_gradients")
        var_list = trainable_variables(loss) if var_list is None else list(var_list)
        for v in var_list:
            if not isinstance(v, Variable):
                raise GradientError(f"{self._name}: {v!r} in var_list is not an ff.Variable")
            if v.dtype != "float32":
                raise GradientError(f"{self._name}: variable '{v.name}' is {v.dtype}; "
                                    f"only float32 variables can be trained")
        if not var_list:
            raise GradientError(f"{self._name}: no variables to optimize: '{loss.name}' "
                                f"depends on no float32 Variable")
        grads = gradients(loss, var_list)
        return list(zip(grads, var_list))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None) -> Tensor:
        """An op that applies one update with the given gradients; its value is the step
        count after the update. Pairs with a None gradient are skipped. global_step, an
        int32 Variable, is incremented too (TensorFlow 1's)."""
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            names = ", ".join(v.name for _, v in grads_and_vars)
            raise GradientError(f"{self._name}: no gradients provided for any variable "
                                f"({names}): does the loss depend on them?")
        graph = pairs[0][1].graph
        self._bind(graph)
        assigns = []
        for _, var in pairs:
            if not isinstance(var, Variable) or var.graph is not graph:
                raise GradientError(f"{self._name}: {var!r} is not a Variable of "
                                    f"graph '{graph.name}'")
            self._create_slots(var)
        # in a branch or a loop's body the updates belong there (they happen only when
        # it runs: frontend/control_effects.py); slots stay variables of the root graph
        here = get_default_graph()
        target = here if here.parent is not None and here.root is graph else graph
        with target.as_default(), target.name_scope(f"{self._name}/"):
            lr = self._tensor(self._learning_rate)
            for grad, var in pairs:
                with target.name_scope(f"{self._name}/update_{var.op.name}/"):
                    assigns.extend(self._apply_dense(grad, var, lr))
            assigns.extend(self._finish())
            if global_step is not None:
                assigns.append(global_step.assign(global_step + 1))
            count = self.iterations.assign(self.iterations + 1, name="iterations_update")
            return with_dependencies(assigns, count, name=name or "step")

    def minimize(self, loss, global_step=None, var_list=None, name=None) -> Tensor:
        """compute_gradients then apply_gradients: an op applying one step."""
        return self.apply_gradients(self.compute_gradients(loss, var_list),
                                    global_step=global_step, name=name)

    def get_slot(self, var, name) -> Variable | None:
        """The slot `name` ("m", "v", "accumulator", ...) made for var, or None."""
        return self._slots.get(name, {}).get(var.op.name)

    def get_slot_names(self) -> list:
        return sorted(self._slots)

    def variables(self) -> list:
        """Every Variable this optimizer made: slots, non-slot state and iterations."""
        out = [v for slots in self._slots.values() for v in slots.values()]
        return out + list(self._non_slot.values()) + \
            ([self.iterations] if self.iterations is not None else [])

    # -- helpers for subclasses ---------------------------------------------------------
    def _bind(self, graph):
        if self._graph is None:
            self._graph = graph
            with graph.as_default(), graph.name_scope(f"{self._name}/"):
                self.iterations = Variable(np.int32(0), name="iterations")
        elif self._graph is not graph:
            raise GradientError(f"{self._name} is already used in graph "
                                f"'{self._graph.name}'; make one optimizer per graph")

    def _slot(self, var, slot_name, initial=0.0) -> Variable:
        """var's slot, made on first use: a Variable of var's shape holding initial,
        named '<var>/<optimizer>/<slot>'."""
        slots = self._slots.setdefault(slot_name, {})
        if var.op.name not in slots:
            # the variable's graph, not the default one: apply_gradients may be called
            # outside `with graph.as_default()` (TensorFlow 1 takes the variables' graph)
            with self._graph.as_default(), \
                    self._graph.name_scope(f"{var.op.name}/{self._name}/"):
                slots[var.op.name] = Variable(np.full(var.shape, initial, np.float32),
                                              name=slot_name, trainable=False)
        return slots[var.op.name]

    def _non_slot_variable(self, name, initial) -> Variable:
        if name not in self._non_slot:
            with self._graph.as_default(), self._graph.name_scope(f"{self._name}/"):
                self._non_slot[name] = Variable(np.float32(initial), name=name,
                                                trainable=False)
        return self._non_slot[name]

    def _tensor(self, value) -> Tensor:
        return value if isinstance(value, Tensor) else _ops.constant(np.float32(value))

    def _create_slots(self, var):
        pass

    def _apply_dense(self, grad, var, lr) -> list:
        raise NotImplementedError

    def _finish(self) -> list:
        return []

    def __repr__(self):
        return f"<ff.optim.{type(self).__name__} '{self._name}'>"


# -- the optimizers ------------------------------------------------------------------
class SGD(Optimizer):
    """Gradient descent (tf.compat.v1.train.GradientDescentOptimizer):
    var -= learning_rate * grad."""

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(learning_rate, use_locking, name)

    def _apply_dense(self, grad, var, lr):
        return [var.assign(var - lr * grad)]


GradientDescent = SGD


class Momentum(Optimizer):
    """tf.compat.v1.train.MomentumOptimizer (ApplyMomentum):
        accum = accum * momentum + grad
        var -= lr * accum                                   (use_nesterov=False)
        var -= lr * grad + lr * momentum * accum            (use_nesterov=True)
    """

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum",
                 use_nesterov=False):
        super().__init__(learning_rate, use_locking, name)
        self._momentum = momentum
        self._use_nesterov = bool(use_nesterov)

    def _create_slots(self, var):
        self._slot(var, "momentum")

    def _apply_dense(self, grad, var, lr):
        accum = self._slot(var, "momentum")
        mu = self._tensor(self._momentum)
        accum_t = accum * mu + grad
        if self._use_nesterov:
            var_t = var - (grad * lr + accum_t * mu * lr)
        else:
            var_t = var - accum_t * lr
        return [accum.assign(accum_t), var.assign(var_t)]


class Adagrad(Optimizer):
    """tf.compat.v1.train.AdagradOptimizer (ApplyAdagrad), accumulators starting at
    initial_accumulator_value:
        accum += grad ** 2
        var -= lr * grad / sqrt(accum)
    """

    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False,
                 name="Adagrad"):
        if initial_accumulator_value <= 0.0:
            raise AttrError(f"initial_accumulator_value must be positive, got "
                            f"{initial_accumulator_value}")
        super().__init__(learning_rate, use_locking, name)
        self._initial_accumulator_value = initial_accumulator_value

    def _create_slots(self, var):
        self._slot(var, "accumulator", self._initial_accumulator_value)

    def _apply_dense(self, grad, var, lr):
        accum = self._slot(var, "accumulator")
        accum_t = accum + _ops.square(grad)
        return [accum.assign(accum_t), var.assign(var - lr * grad * _ops.rsqrt(accum_t))]


class Adadelta(Optimizer):
    """tf.compat.v1.train.AdadeltaOptimizer (ApplyAdadelta):
        accum = rho * accum + (1 - rho) * grad ** 2
        update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad
        accum_update = rho * accum_update + (1 - rho) * update ** 2
        var -= lr * update
    """

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-8, use_locking=False,
                 name="Adadelta"):
        super().__init__(learning_rate, use_locking, name)
        self._rho, self._epsilon = rho, epsilon

    def _create_slots(self, var):
        self._slot(var, "accum")
        self._slot(var, "accum_update")

    def _apply_dense(self, grad, var, lr):
        accum, accum_update = self._slot(var, "accum"), self._slot(var, "accum_update")
        rho, eps = self._rho, self._epsilon
        accum_t = accum * rho + _ops.square(grad) * _one_minus(rho)
        update = _ops.sqrt(accum_update + eps) * _ops.rsqrt(accum_t + eps) * grad
        accum_update_t = accum_update * rho + _ops.square(update) * _one_minus(rho)
        return [accum.assign(accum_t), accum_update.assign(accum_update_t),
                var.assign(var - update * lr)]


class Adam(Optimizer):
    """tf.compat.v1.train.AdamOptimizer (ApplyAdam), with beta1_power and beta2_power
    Variables that start at beta1, beta2 and are multiplied by them after each step:
        lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
        m = m + (grad - m) * (1 - beta1)
        v = v + (grad ** 2 - v) * (1 - beta2)
        var -= lr_t * m / (sqrt(v) + epsilon)
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 use_locking=False, name="Adam"):
        super().__init__(learning_rate, use_locking, name)
        self._beta1, self._beta2, self._epsilon = beta1, beta2, epsilon

    def _create_slots(self, var):
        self._non_slot_variable("beta1_power", self._beta1)
        self._non_slot_variable("beta2_power", self._beta2)
        self._slot(var, "m")
        self._slot(var, "v")

    def _apply_dense(self, grad, var, lr):
        m, v = self._slot(var, "m"), self._slot(var, "v")
        beta1_power = self._non_slot["beta1_power"]
        beta2_power = self._non_slot["beta2_power"]
        lr_t = lr * _ops.sqrt(1.0 - beta2_power) / (1.0 - beta1_power)
        m_t = m + (grad - m) * _one_minus(self._beta1)
        v_t = v + (_ops.square(grad) - v) * _one_minus(self._beta2)
        var_t = var - lr_t * m_t / (_ops.sqrt(v_t) + self._epsilon)
        return [m.assign(m_t), v.assign(v_t), var.assign(var_t)]

    def _finish(self):
        b1, b2 = self._non_slot["beta1_power"], self._non_slot["beta2_power"]
        return [b1.assign(b1 * self._beta1), b2.assign(b2 * self._beta2)]


class Adamax(Optimizer):
    """AdaMax, the infinity-norm variant of Adam (TensorFlow 1's
    tf.contrib.opt.AdaMaxOptimizer, ApplyAdaMax), with a beta1_power Variable:
        m = m + (grad - m) * (1 - beta1)
        v = max(beta2 * v, |grad|)
        var -= lr / (1 - beta1_power) * m / (v + epsilon)
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 use_locking=False, name="AdaMax"):
        super().__init__(learning_rate, use_locking, name)
        self._beta1, self._beta2, self._epsilon = beta1, beta2, epsilon

    def _create_slots(self, var):
        self._non_slot_variable("beta1_power", self._beta1)
        self._slot(var, "m")
        self._slot(var, "v")

    def _apply_dense(self, grad, var, lr):
        m, v = self._slot(var, "m"), self._slot(var, "v")
        beta1_power = self._non_slot["beta1_power"]
        m_t = m + (grad - m) * _one_minus(self._beta1)
        v_t = _ops.maximum(v * self._beta2, _ops.abs(grad))
        var_t = var - lr / (1.0 - beta1_power) * (m_t / (v_t + self._epsilon))
        return [m.assign(m_t), v.assign(v_t), var.assign(var_t)]

    def _finish(self):
        b1 = self._non_slot["beta1_power"]
        return [b1.assign(b1 * self._beta1)]


class RMSProp(Optimizer):
    """tf.compat.v1.train.RMSPropOptimizer (ApplyRMSProp / ApplyCenteredRMSProp). The
    mean square starts at ones (TensorFlow 1's; Keras starts at zeros):
        ms = ms + (grad ** 2 - ms) * (1 - decay)
        mg = mg + (grad - mg) * (1 - decay)                 (centered only)
        denom = ms + epsilon, or ms - mg ** 2 + epsilon     (centered)
        mom = mom * momentum + lr * grad / sqrt(denom)
        var -= mom
    """

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10,
                 use_locking=False, centered=False, name="RMSProp"):
        super().__init__(learning_rate, use_locking, name)
        self._decay, self._momentum, self._epsilon = decay, momentum, epsilon
        self._centered = bool(centered)

    def _create_slots(self, var):
        self._slot(var, "rms", 1.0)
        if self._centered:
            self._slot(var, "mg")
        self._slot(var, "momentum")

    def _apply_dense(self, grad, var, lr):
        ms, mom = self._slot(var, "rms"), self._slot(var, "momentum")
        ms_t = ms + (_ops.square(grad) - ms) * _one_minus(self._decay)
        assigns = [ms.assign(ms_t)]
        denom = ms_t + self._epsilon
        if self._centered:
            mg = self._slot(var, "mg")
            mg_t = mg + (grad - mg) * _one_minus(self._decay)
            assigns.append(mg.assign(mg_t))
            denom = ms_t - _ops.square(mg_t) + self._epsilon
        mom_t = mom * self._momentum + lr * grad * _ops.rsqrt(denom)
        return assigns + [mom.assign(mom_t), var.assign(var - mom_t)]


def __dir__():
    """dir() of the module: its API (__all__), not its imports."""
    return sorted(__all__)
