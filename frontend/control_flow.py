"""Control flow with TensorFlow's names: tf.while_loop, tf.cond, tf.scan, tf.map_fn,
tf.foldl / tf.foldr, and a counted loop, ff.fori_loop (JAX's lax.fori_loop).

Each traces the user's Python functions once into sub-graphs of their own (ir
Graphs: ir/ops/control.py); a tensor of the enclosing graph that a function uses is
captured, becoming an input of the loop's node. Loop variables may be nested
structures (tuples, lists, dicts, namedtuples), as TensorFlow's nest accepts them.

>>> import fragflow as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     i, total = tf.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + i), (0, 0))
>>> [int(v) for v in tf.Session(g, backend="numpy").run([i, total])]
[5, 10]
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import FragflowError
from ..ir.graph import Graph, Value, get_default_graph
from ..ir.ops import autodiff_ops, control as _control
from ..ir.ops.state import placeholder as _placeholder
from ..ir.source import user_location
from ..ir.types import TensorType
from .control_effects import functionalize
from .ops import cast, concat, equal, expand_dims, logical_and
from .tensor import Tensor, as_tensor_value, wrap

__all__ = ["while_loop", "cond", "case", "switch_case", "scan", "map_fn", "foldl", "foldr",
           "fori_loop"]


class ControlFlowError(FragflowError, ValueError):
    """A loop or branch function that returns the wrong structure, or cannot be traced."""


# -- nested structures (TensorFlow's nest, small) ------------------------------------------
def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def flatten(struct):
    """(leaves, tree): dicts by sorted key, as TensorFlow's nest orders them."""
    leaves: list = []

    def walk(x):
        if _is_namedtuple(x):
            return ("namedtuple", type(x), tuple(walk(v) for v in x))
        if isinstance(x, (tuple, list)):
            return ("seq", type(x), tuple(walk(v) for v in x))
        if isinstance(x, dict):
            keys = sorted(x)
            return ("dict", type(x), tuple(keys), tuple(walk(x[k]) for k in keys))
        leaves.append(x)
        return ("leaf",)
    return leaves, walk(struct)


def unflatten(tree, leaves):
    it = iter(leaves)

    def build(t):
        kind = t[0]
        if kind == "leaf":
            return next(it)
        if kind == "namedtuple":
            return t[1](*[build(c) for c in t[2]])
        if kind == "seq":
            return t[1](build(c) for c in t[2])
        return t[1]((k, build(c)) for k, c in zip(t[2], t[3]))
    return build(tree)


def _shape_of_tree(tree) -> str:
    """A structure as TensorFlow prints it in its errors: (., [., .], {'h': .})."""
    kind = tree[0]
    if kind == "leaf":
        return "."
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {_shape_of_tree(c)}" for k, c in zip(tree[2], tree[3])) \
            + "}"
    inner = ", ".join(_shape_of_tree(c) for c in tree[2])
    return f"[{inner}]" if tree[1] is list else f"({inner}{',' if len(tree[2]) == 1 else ''})"


def _same_structure(a, b) -> bool:
    """Same nesting; a list and a tuple count as the same sequence (TF1's loops)."""
    if a[0] == "leaf" or b[0] == "leaf":
        return a[0] == b[0]
    if a[0] == "dict" or b[0] == "dict":
        return a[0] == b[0] and a[2] == b[2] and all(map(_same_structure, a[3], b[3]))
    return len(a[2]) == len(b[2]) and all(map(_same_structure, a[2], b[2]))


def _paths(tree, prefix="") -> list:
    """A name per leaf, for error messages: 'loop_vars[1]', "loop_vars['h']"."""
    kind = tree[0]
    if kind == "leaf":
        return [prefix]
    if kind == "dict":
        return [p for k, c in zip(tree[2], tree[3]) for p in _paths(c, f"{prefix}[{k!r}]")]
    return [p for k, c in enumerate(tree[2]) for p in _paths(c, f"{prefix}[{k}]")]


def _flatten_up_to(tree, struct, what):
    """The leaves of struct where tree has leaves (shape_invariants: a shape is a
    leaf even though it is a tuple)."""
    if tree[0] == "leaf":
        return [struct]
    if tree[0] == "dict":
        if not isinstance(struct, dict) or sorted(struct) != list(tree[2]):
            raise ControlFlowError(f"{what} must have the structure of loop_vars, "
                                   f"{_shape_of_tree(tree)}")
        return [x for k, c in zip(tree[2], tree[3]) for x in _flatten_up_to(c, struct[k], what)]
    if not isinstance(struct, (tuple, list)) or len(struct) != len(tree[2]):
        raise ControlFlowError(f"{what} must have the structure of loop_vars, "
                               f"{_shape_of_tree(tree)}")
    return [x for c, s in zip(tree[2], struct) for x in _flatten_up_to(c, s, what)]


# -- tracing ----------------------------------------------------------------------------------
def _values(leaves, what) -> list:
    out = []
    for leaf in leaves:
        if isinstance(leaf, Tensor):
            out.append(leaf.value)
        elif isinstance(leaf, Value):
            out.append(leaf)
        elif leaf is None:
            raise ControlFlowError(f"{what} holds None; loop variables and results must "
                                   f"be tensors or numbers")
        else:
            try:
                out.append(as_tensor_value(leaf))
            except FragflowError as err:
                raise ControlFlowError(f"{what}: {err}") from None
    return out


def _trace(fn, types, outer: Graph, scope: str, what: str, where: str):
    """fn (flat tensors -> a structure) traced into a sub-graph of outer: (sub-graph,
    the result's tree, the outer values it captured)."""
    sub = Graph(f"{outer.name}.{scope}")
    sub.parent = outer
    sub._scopes = [scope]
    try:
        with sub.as_default():
            args = [_placeholder(sub, t.shape, t.dtype, name=f"arg{k}")
                    for k, t in enumerate(types)]
            result = fn([wrap(a) for a in args])
            leaves, tree = flatten(result)
            values = [sub.capture(v) for v in _values(leaves, f"{what} ({where})'s result")]
    finally:
        sub.parent = None
    sub.outputs = values
    return sub, tree, list(sub.captured)


def _types(values) -> list:
    return [TensorType(v.shape, v.dtype) for v in values]


def _invariant(shape):
    if shape is None:
        return None
    if hasattr(shape, "as_list"):
        shape = shape.as_list()
    try:
        return tuple(None if d is None else int(d) for d in shape)
    except TypeError:
        raise ControlFlowError(f"a shape invariant must be a shape (a list of ints and "
                               f"None), got {shape!r}") from None


# -- while_loop ---------------------------------------------------------------------------
def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10,
               back_prop=True, swap_memory=False, maximum_iterations=None, name=None,
               return_same_structure=False):
    """TensorFlow's tf.while_loop: repeat `loop_vars = body(*loop_vars)` while
    `cond(*loop_vars)` holds, at most maximum_iterations times.

    loop_vars: a tensor, or a nested structure (tuple, list, dict) of them. Each keeps
    its shape and dtype across iterations unless shape_invariants (the same structure,
    shapes with None where a dim may change) says otherwise. As in TF1, a single loop
    variable given in a list comes back as one tensor unless return_same_structure.
    Gradients flow where maximum_iterations is a Python int."""
    where = user_location()
    graph = get_default_graph()
    label = f"while_loop '{name or 'while'}'"
    single = not isinstance(loop_vars, (tuple, list))     # a dict is one structure
    structure = (loop_vars,) if single else loop_vars
    leaves, tree = flatten(structure)
    if not leaves:
        raise ControlFlowError(f"{label} ({where}): loop_vars is empty")
    names = [f"loop_vars{p}" for p in _paths(tree)]
    values = _values(leaves, f"{label} ({where})'s loop_vars")
    invariants = None
    if shape_invariants is not None:
        inv = (shape_invariants,) if single else shape_invariants
        invariants = tuple(_invariant(s) for s in _flatten_up_to(
            tree, inv, f"{label} ({where}): shape_invariants"))
    var_types = _control.loop_types(_types(values), {"shape_invariants": invariants,
                                                      "names": tuple(names)})
    counter = None
    if maximum_iterations is not None and not isinstance(maximum_iterations, (int, np.integer)):
        counter = _values([maximum_iterations], f"{label} ({where})'s maximum_iterations")[0]
        maximum_iterations = None
    elif maximum_iterations is not None:
        maximum_iterations = int(maximum_iterations)
        if maximum_iterations < 0:
            raise ControlFlowError(f"{label} ({where}): maximum_iterations must be >= 0, "
                                   f"got {maximum_iterations}")

    def call(fn, args):
        packed = unflatten(tree, args[:len(leaves)])
        return fn(*packed) if not single else fn(packed[0])

    def cond_fn(args):
        pred = call(cond, args)
        if counter is not None:
            pred = logical_and(wrap(args[-1].value) < wrap(counter), pred)
        return pred

    def body_fn(args):
        result = call(body, args)
        flat, result_tree = flatten(result)
        expected = tree[2][0] if single else tree
        if not (len(leaves) == 1 and result_tree[0] == "leaf"   # TF: returned bare
                or _same_structure(expected, result_tree)):
            raise ControlFlowError(
                f"{label} ({where}): its body returns {_shape_of_tree(result_tree)} but "
                f"loop_vars is {_shape_of_tree(expected)}; the body must return the loop "
                f"variables' structure")
        if counter is not None:
            flat = list(flat) + [wrap(args[-1].value) + 1]
        return flat

    types = list(var_types)
    if counter is not None:
        types.append(TensorType((), counter.dtype))
        names.append("the iteration counter")
        values.append(as_tensor_value(np.zeros((), counter.dtype)))
        if invariants is not None:
            invariants = invariants + (None,)
    cond_g, cond_tree, cond_caps = _trace(cond_fn, types, graph, name or "while",
                                          f"{label}'s condition", where)
    if cond_tree[0] != "leaf":
        raise ControlFlowError(f"{label} ({where}): its condition must return one bool "
                               f"scalar, it returns {_shape_of_tree(cond_tree)}")
    body_g, _, body_caps = _trace(body_fn, types, graph, name or "while",
                                  f"{label}'s body", where)
    outs = _control.while_loop(graph, values, cond_g, body_g, cond_caps, body_caps,
                               invariants, maximum_iterations, names, name)
    outs = functionalize(graph, graph.nodes[-1])
    if not back_prop:
        outs = _stopped(outs)
    if counter is not None:
        outs = outs[:-1]
    result = unflatten(tree, [wrap(v) for v in outs])
    if single:
        return result[0]
    if (not return_same_structure and isinstance(loop_vars, (list, tuple))
            and len(leaves) == 1 and tree[2][0][0] == "leaf"):
        return result[0]
    return result


# -- cond ---------------------------------------------------------------------------------
def cond(pred, true_fn=None, false_fn=None, strict=False, name=None):
    """TensorFlow's tf.cond: true_fn()'s result where the bool scalar pred holds, else
    false_fn()'s; only the branch taken runs. Both must return the same structure, of
    the same dtypes and shapes. As in TF1, a result that is a list or tuple of one
    tensor comes back as that tensor unless strict."""
    where = user_location()
    graph = get_default_graph()
    label = f"cond '{name or 'cond'}'"
    if not callable(true_fn) or not callable(false_fn):
        raise ControlFlowError(f"{label} ({where}): true_fn and false_fn must be "
                               f"callables taking no arguments")
    (pred_value,) = _values([pred], f"{label} ({where})'s pred")
    t_g, t_tree, t_caps = _trace(lambda args: true_fn(), [], graph, name or "cond",
                                 f"{label}'s true branch", where)
    f_g, f_tree, f_caps = _trace(lambda args: false_fn(), [], graph, name or "cond",
                                 f"{label}'s false branch", where)
    if not _same_structure(t_tree, f_tree):
        raise ControlFlowError(f"{label} ({where}): its true branch returns "
                               f"{_shape_of_tree(t_tree)} and its false branch "
                               f"{_shape_of_tree(f_tree)}; both must return one structure")
    outs = _control.cond_op(graph, pred_value, t_g, f_g, t_caps, f_caps, name)
    outs = functionalize(graph, graph.nodes[-1])
    result = unflatten(t_tree, [wrap(v) for v in outs])
    if not strict and t_tree[0] == "seq" and len(t_tree[2]) == 1 and t_tree[2][0][0] == "leaf":
        return result[0]
    return result


def case(pred_fn_pairs, default=None, exclusive=False, strict=False, name="case"):
    """TensorFlow's tf.case: the result of the function of the first (pred, fn) pair
    whose bool scalar pred holds, else default()'s; nested tf.conds, so only the
    function chosen runs. Without default the last pair's function is the default.
    exclusive=True is accepted; fragflow does not check that at most one pred holds
    (the first true one is chosen)."""
    pairs = list(pred_fn_pairs.items()) if isinstance(pred_fn_pairs, dict) \
        else list(pred_fn_pairs)
    if not pairs or any(not (isinstance(p, (tuple, list)) and len(p) == 2
                             and callable(p[1])) for p in pairs):
        raise ControlFlowError(f"case '{name}' ({user_location()}): pred_fn_pairs must be "
                               f"a non-empty list of (bool scalar, callable) pairs")
    if default is None:
        default, pairs = pairs[-1][1], pairs[:-1]
    if not pairs:
        return default()

    def chain(k):
        if k == len(pairs):
            return default()
        pred, fn = pairs[k]
        return cond(pred, fn, lambda: chain(k + 1), strict=True, name=name)
    return _unpacked(chain(0), strict)


def switch_case(branch_index, branch_fns, default=None, name="switch_case"):
    """TensorFlow's tf.switch_case: branch_fns[branch_index]() (a list, or a dict or
    list of (int, fn) pairs), default() where branch_index (an int32 scalar) names no
    branch, the last branch without default; only the branch taken runs."""
    if isinstance(branch_fns, dict):
        items = sorted(branch_fns.items())
    else:
        fns = list(branch_fns)
        items = list(fns) if fns and all(isinstance(f, (tuple, list)) for f in fns) \
            else list(enumerate(fns))
    if not items or any(not callable(fn) or isinstance(k, bool) or not isinstance(k, int)
                        for k, fn in items):
        raise ControlFlowError(f"switch_case '{name}' ({user_location()}): branch_fns must "
                               f"be a non-empty list of callables, or of (int, callable) "
                               f"pairs")
    (index,) = _values([branch_index], f"switch_case '{name}''s branch_index")
    if index.dtype != "int32" or index.shape != ():
        raise ControlFlowError(f"switch_case '{name}' ({user_location()}): branch_index "
                               f"must be an int32 scalar, got {index.type}")
    index = wrap(index)
    if default is None:
        default = items[-1][1]

    def chain(k):
        if k == len(items):
            return default()
        key, fn = items[k]
        return cond(equal(index, key), fn, lambda: chain(k + 1), strict=True, name=name)
    return chain(0)


def _unpacked(result, strict):
    if not strict and isinstance(result, (list, tuple)) and len(result) == 1 \
            and not isinstance(result[0], (list, tuple, dict)):
        return result[0]
    return result


# -- scan and its relatives ---------------------------------------------------------------
def _scan_core(fn, carry_tree, carry_values, elem_tree, elem_values, reverse, length,
               name, label, where, carry_is_y, back_prop=True):
    """The ir scan of fn(carry, x) -> (new carry, y) (carry_is_y: TF's scan, where the
    new carry is also the step's output). Returns (final carry values, ys tree, ys)."""
    graph = get_default_graph()
    nc, ne = len(carry_values), len(elem_values)
    ys_tree_box = []

    def body(args):
        carry = unflatten(carry_tree, args[:nc]) if carry_tree is not None else None
        x = unflatten(elem_tree, args[nc:nc + ne]) if elem_tree is not None else None
        result = fn(carry, x)
        if carry_is_y:
            flat, rtree = flatten(result)
            if carry_tree is not None and not _same_structure(carry_tree, rtree):
                if not (nc == 1 and rtree[0] == "leaf"):
                    raise ControlFlowError(
                        f"{label} ({where}): fn returns {_shape_of_tree(rtree)} but the "
                        f"accumulator is {_shape_of_tree(carry_tree)}; fn must return the "
                        f"accumulator's structure")
            ys_tree_box.append(carry_tree if nc else rtree)
            return list(flat) + (list(flat) if nc else [])
        new_carry, y = result
        cflat, ctree = flatten(new_carry) if carry_tree is not None else ([], None)
        if carry_tree is not None and not _same_structure(carry_tree, ctree):
            raise ControlFlowError(f"{label} ({where}): the body returns the carry "
                                   f"{_shape_of_tree(ctree)} but it is "
                                   f"{_shape_of_tree(carry_tree)}")
        yflat, ytree = flatten(y) if y is not None else ([], None)
        ys_tree_box.append(ytree)
        return list(cflat) + list(yflat)

    types = _types(carry_values) + [TensorType(v.shape[1:], v.dtype) if v.shape else
                                    TensorType((), v.dtype) for v in elem_values]
    for v in elem_values:
        if not v.shape:
            raise ControlFlowError(f"{label} ({where}): elems must have a leading axis to "
                                   f"scan along; '{v.name}' is a scalar")
    sub, _, caps = _trace(body, types, graph, name or "scan", f"{label}'s fn", where)
    outs = _control.scan(graph, sub, carry_values, elem_values, caps, reverse=reverse,
                         length=length, name=name)
    outs = functionalize(graph, graph.nodes[-1])
    if not back_prop:
        outs = _stopped(outs)
    return outs[:nc], ys_tree_box[0], outs[nc:]


def _stopped(values) -> list:
    """back_prop=False: no gradient flows back through the loop (TensorFlow's)."""
    return [autodiff_ops.stop_gradient(v) if v.dtype == "float32" else v for v in values]


def _elems(elems, label, where):
    leaves, tree = flatten(elems)
    if not leaves:
        raise ControlFlowError(f"{label} ({where}): elems is empty")
    return tree, _values(leaves, f"{label} ({where})'s elems")


def _first_rows(values, reverse):
    """(the first (last, reverse) row of each, the rest along axis 0)."""
    heads, rests = [], []
    for v in values:
        t = wrap(v)
        if v.shape[0] == 0:
            raise ControlFlowError("elems of length 0 need an initializer")
        heads.append((t[-1] if reverse else t[0]).value)
        rests.append((t[:-1] if reverse else t[1:]).value)
    return heads, rests


def scan(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
         swap_memory=False, infer_shape=True, reverse=False, name=None):
    """TensorFlow's tf.scan: acc = fn(acc, x) for each x of elems along axis 0 (from
    the end with reverse=True); returns every acc, stacked. Without initializer the
    first element (the last, reverse) is the first acc."""
    where = user_location()
    label = f"scan '{name or 'scan'}'"
    elem_tree, elem_values = _elems(elems, label, where)
    if initializer is None:
        heads, elem_values = _first_rows(elem_values, reverse)
        carry_values, carry_tree = heads, elem_tree
    else:
        leaves, carry_tree = flatten(initializer)
        carry_values = _values(leaves, f"{label} ({where})'s initializer")
    _, ys_tree, ys = _scan_core(lambda acc, x: fn(acc, x), carry_tree, carry_values,
                                elem_tree, elem_values, reverse, None, name, label, where,
                                carry_is_y=True, back_prop=back_prop)
    out = [wrap(y) for y in ys]
    if initializer is None:
        out = [concat([y, expand_dims(wrap(h), 0)] if reverse else
                      [expand_dims(wrap(h), 0), y], 0) for y, h in zip(out, carry_values)]
    return unflatten(ys_tree, out)


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True,
           swap_memory=False, infer_shape=True, name=None, fn_output_signature=None):
    """TensorFlow's tf.map_fn: fn applied to each slice of elems along axis 0, the
    results stacked (elems and results may be nested structures)."""
    where = user_location()
    label = f"map_fn '{name or 'map'}'"
    elem_tree, elem_values = _elems(elems, label, where)
    _, ys_tree, ys = _scan_core(lambda _c, x: (None, fn(x)), None, [], elem_tree,
                                elem_values, False, None, name or "map", label, where,
                                carry_is_y=False, back_prop=back_prop)
    if ys_tree is None:
        raise ControlFlowError(f"{label} ({where}): fn returns None")
    return unflatten(ys_tree, [wrap(y) for y in ys])


def _fold(fn, elems, initializer, reverse, name, label, back_prop=True):
    where = user_location()
    elem_tree, elem_values = _elems(elems, label, where)
    if initializer is None:
        heads, elem_values = _first_rows(elem_values, reverse)
        carry_values, carry_tree = heads, elem_tree
    else:
        leaves, carry_tree = flatten(initializer)
        carry_values = _values(leaves, f"{label} ({where})'s initializer")

    def step(acc, x):
        new = fn(acc, x)
        flat, rtree = flatten(new)
        if not _same_structure(carry_tree, rtree) and not (len(flat) == 1 and
                                                           rtree[0] == "leaf"):
            raise ControlFlowError(f"{label} ({where}): fn returns {_shape_of_tree(rtree)} "
                                   f"but the accumulator is {_shape_of_tree(carry_tree)}")
        return unflatten(carry_tree, flat), None
    final, _, _ = _scan_core(step, carry_tree, carry_values, elem_tree, elem_values,
                             reverse, None, name, label, where, carry_is_y=False,
                             back_prop=back_prop)
    return unflatten(carry_tree, [wrap(v) for v in final])


def foldl(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """TensorFlow's tf.foldl: acc = fn(acc, x) over elems from the first; the last acc."""
    return _fold(fn, elems, initializer, False, name or "foldl",
                 f"foldl '{name or 'foldl'}'", back_prop)


def foldr(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """TensorFlow's tf.foldr: acc = fn(acc, x) over elems from the last; the last acc."""
    return _fold(fn, elems, initializer, True, name or "foldr",
                 f"foldr '{name or 'foldr'}'", back_prop)


def fori_loop(lower, upper, body_fun, init_val, name=None):
    """JAX's lax.fori_loop: val = body_fun(i, val) for i in range(lower, upper).

    With Python ints for lower and upper it is a counted loop (a scan of
    upper - lower steps: differentiable, and reads nothing back on GL); with tensor
    bounds, a while_loop."""
    where = user_location()
    label = f"fori_loop '{name or 'fori_loop'}'"
    leaves, tree = flatten(init_val)
    values = _values(leaves, f"{label} ({where})'s init_val")
    if isinstance(lower, (int, np.integer)) and isinstance(upper, (int, np.integer)):
        lower, upper = int(lower), int(upper)
        start = as_tensor_value(np.int32(lower))

        def step(carry, _x):
            i, val = carry[0], unflatten(tree, carry[1:])
            new = body_fun(i, val)
            flat, rtree = flatten(new)
            if not _same_structure(tree, rtree):
                raise ControlFlowError(f"{label} ({where}): body_fun returns "
                                       f"{_shape_of_tree(rtree)} but init_val is "
                                       f"{_shape_of_tree(tree)}")
            return [i + 1] + list(flat), None
        carry_tree = ("seq", list, (("leaf",),) * (1 + len(values)))
        final, _, _ = _scan_core(step, carry_tree, [start] + values, None, [], False,
                                 max(upper - lower, 0), name or "fori_loop", label, where,
                                 carry_is_y=False)
        return unflatten(tree, [wrap(v) for v in final[1:]])
    lo = wrap(_values([lower], label)[0])
    hi = wrap(_values([upper], label)[0])
    lo = cast(lo, "int32") if lo.dtype != "int32" else lo
    hi = cast(hi, "int32") if hi.dtype != "int32" else hi
    out = while_loop(lambda i, v: i < hi, lambda i, v: (i + 1, body_fun(i, v)),
                     (lo, unflatten(tree, [wrap(v) for v in values])), name=name)
    return out[1]
