"""Graph.add_copy (how passes copy nodes) and TensorType's canonical forms: the fast
paths must give what the checked paths give."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.errors import ShapeError
from fragflow.ir.graph import Graph
from fragflow.ir.types import TensorType


def _source_graph():
    g = ff.Graph("src")
    with g.as_default():
        x = ff.placeholder((None, 4), "float32", name="x")
        w = ff.constant(np.ones((4, 3), np.float32))
        with ff.name_scope("dense"):
            y = ff.relu(x @ w)
    return g, x, y


def _copy_all(graph, new, fed=None):
    mapping = dict(fed or {})
    for node in graph.nodes:
        if node.outputs and node.outputs[0] in mapping:
            continue
        copy = new.add_copy(node, [mapping[v] for v in node.inputs])
        mapping.update(zip(node.outputs, copy.outputs))
    return mapping


def test_a_copy_keeps_op_attrs_name_scope_source_and_types():
    g, _, y = _source_graph()
    new = Graph("copy")
    mapping = _copy_all(g, new)
    assert [n.name for n in new.nodes] == [n.name for n in g.nodes]
    for old, copy in zip(g.nodes, new.nodes):
        assert (copy.op, copy.scope, copy.source) == (old.op, old.scope, old.source)
        assert dict(copy.attrs).keys() == dict(old.attrs).keys()
        assert [v.type for v in copy.outputs] == [v.type for v in old.outputs]
        assert all(v.node is copy for v in copy.outputs)
        assert all(v.graph is new for v in copy.inputs)
    assert mapping[y.value].type == TensorType((None, 3), "float32")


def test_a_copy_with_inputs_of_other_types_infers_them_again():
    g, x, y = _source_graph()
    new = Graph("copy")
    fed = new.add_node("placeholder", [], {"shape": (2, 4), "dtype": "float32"},
                       exact_name="x")
    mapping = _copy_all(g, new, {x.value: fed.outputs[0]})
    assert mapping[y.value].type == TensorType((2, 3), "float32")


def test_a_copy_whose_new_input_does_not_fit_names_the_node():
    g, x, _ = _source_graph()
    new = Graph("copy")
    fed = new.add_node("placeholder", [], {"shape": (2, 5), "dtype": "float32"},
                       exact_name="x")
    with pytest.raises(ShapeError, match="matmul"):
        _copy_all(g, new, {x.value: fed.outputs[0]})


def test_a_copy_of_a_name_already_there_is_refused():
    g, _, _ = _source_graph()
    new = Graph("copy")
    _copy_all(g, new)
    with pytest.raises(ff.FragflowError, match="already exists"):
        new.add_copy(g.nodes[0], [])


def test_a_copy_reading_another_graphs_value_is_refused():
    g, _, _ = _source_graph()
    new = Graph("copy")
    relu = next(n for n in g.nodes if n.op == "relu")
    with pytest.raises(ff.FragflowError, match="belongs to graph"):
        new.add_copy(relu, list(relu.inputs))        # values of g, not of new


def test_pruning_with_a_fed_shape_gives_the_same_types_as_building_with_it():
    g = ff.Graph("src")
    with g.as_default():
        x = ff.placeholder((None, None), "float32", name="x")
        y = ff.relu(x @ ff.constant(np.ones((4, 3), np.float32)))
    sess = ff.Session(g, backend="numpy", passes=[])
    assert sess.run(y, {x: np.ones((3, 4), np.float32)}).shape == (3, 3)
    with pytest.raises(ShapeError, match="matmul"):      # found when pruning copies it
        sess.run(y, {x: np.ones((3, 5), np.float32)})


@pytest.mark.parametrize("shape, dtype, expected", [
    ((2, 3), "float32", ((2, 3), "float32")),
    ([2, 3], "float", ((2, 3), "float32")),
    ((np.int64(2), 3.0), np.int32, ((2, 3), "int32")),
    ((None, 0), "bool", ((None, 0), "bool")),
    ((), "int64", ((), "int32")),
])
def test_tensor_types_are_canonical(shape, dtype, expected):
    t = TensorType(shape, dtype)
    assert (t.shape, t.dtype) == expected
    assert all(d is None or type(d) is int for d in t.shape)


@pytest.mark.parametrize("shape", [(True, 2), (-1,), (2 ** 31,), (2.5,), ("3",)])
def test_bad_dimensions_are_refused(shape):
    with pytest.raises(ShapeError):
        TensorType(shape, "float32")


def test_unknown_dtypes_are_refused():
    with pytest.raises(ff.FragflowError, match="dtype"):
        TensorType((2,), "complex64")
    with pytest.raises(ff.FragflowError, match="dtype"):
        TensorType((2,), ["float32"])
