"""fragflow: a define-then-run tensor graph compiler that runs on GLSL fragment shaders.

    import fragflow as ff
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 4), "float32", name="x")
        y = ff.relu(x * 2.0 + 1.0)
    print(ff.Session(g).run(y, {x: xb}))

See README.md and docs/ARCHITECTURE.md.
"""
import sys as _sys

from .codegen.tuning import Tuning, TuningError  # kernel choice's knobs (docs/ARCHITECTURE.md)
from .frontend import *  # noqa: F401,F403
from .frontend import (
    CompiledFunction,
    Sequential,
    Session,
    Tensor,
    Variable,
    __all__ as _frontend_all,
    fused,
    initializers,
    layers,
    onnx,  # ff.onnx.load / ff.onnx.export (docs/ONNX.md)
    optim,
    tfjs,  # ff.tfjs.load (docs/TFJS.md)
)
from .frontend.namespaces._missing import missing as _missing
from .ir.dot import graph_to_dot as _graph_to_dot
from .ir.errors import (
    AttrError,
    BackendError,
    DTypeError,
    FeedError,
    FetchError,
    FragflowError,
    GradientError,
    GraphError,
    LoopLimitWarning,  # limits: docs/LIMITS.md
    NumericsError,
    SerializationError,
    SessionClosedError,
    ShaderCompileError,
    ShapeError,
    TensorTooLargeError,
    TooManyInputsError,  # limits: docs/LIMITS.md
)
from .ir.graph import Graph, get_default_graph, reset_default_graph
from .ir.printer import format_graph as _format_graph
from .ir.serialize import MAX_FILE_BYTES, graph_from_json, graph_to_json as _graph_to_json
from .ir.types import DTYPES, TensorType
from .runtime import get_context as _get_context
from .runtime.context import devices as _devices
from .tools import webgl  # ff.webgl.export (docs/WEBGL.md)

__version__ = "0.1.0"

float32, int32 = "float32", "int32"
bool_ = "bool"


def dump(graph=None, format: str = "text") -> str:
    """A graph as text (jaxpr-like), "json" (round-trips) or "dot" (Graphviz)."""
    graph = graph if graph is not None else get_default_graph()
    if format == "text":
        return _format_graph(graph)
    if format == "json":
        return _graph_to_json(graph)
    if format == "dot":
        return _graph_to_dot(graph)
    raise FragflowError(f"unknown dump format {format!r}; use text, json or dot")


def gl_info() -> dict:
    """The GL backend in use: backend, vendor, renderer, version and limits."""
    return _get_context().info()


def devices() -> list:
    """The GL devices fragflow can use here (EGL device enumeration), in EGL's order:
    DeviceInfo(index, vendor, renderer, driver, software, node, cuda_device, default,
    error). ``ff.Session(g, device=i)`` or ``FRAGFLOW_DEVICE=i`` picks one; without
    either, the first GPU CUDA_VISIBLE_DEVICES allows, else the software device
    (llvmpipe). One process has one GL context: its first GL Session fixes the device.

    >>> any(d.default for d in devices()) or devices() == []
    True
    """
    return _devices()


def save_graph(graph, path: str) -> None:
    """Write a graph's JSON form to path."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(_graph_to_json(graph))


def load_graph(text_or_path, *, allow_programs: bool = False,
               max_bytes: int = MAX_FILE_BYTES) -> Graph:
    """A graph from ff.dump(g, format="json") text or a file written by save_graph.

    Loading never executes Python code, checks the whole file before building anything
    and reads at most max_bytes. A graph holding ff.gpgpu_program nodes (GLSL that runs
    on the GPU as written) loads only with allow_programs=True: pass it for files you
    trust. Anything wrong with the file raises SerializationError."""
    return graph_from_json(text_or_path, allow_programs=allow_programs, max_bytes=max_bytes)


__all__ = list(_frontend_all) + [
    "LoopLimitWarning", "TooManyInputsError",
    "onnx", "tfjs", "webgl",
    "Graph", "get_default_graph", "reset_default_graph", "dump", "save_graph", "gl_info",
    "devices",
    "load_graph", "fused", "Session", "CompiledFunction", "Tensor", "Variable", "TensorType",
    "DTYPES", "Tuning", "TuningError", "FragflowError", "AttrError", "BackendError",
    "DTypeError", "FeedError",
    "FetchError", "GradientError", "GraphError", "NumericsError", "SerializationError",
    "SessionClosedError", "ShaderCompileError", "ShapeError", "TensorTooLargeError",
]

# TensorFlow's dtype names are module attributes too; __all__ once each, dir(ff) its API
__all__ = list(dict.fromkeys(__all__ + ["float32", "int32", "bool_"]))
# tf.print and tf.bool are attributes, kept out of `from fragflow import *`, which would
# otherwise replace the builtins print and bool in the importing module
__all__ = [name for name in __all__ if name not in ("print", "bool")]


def _register_namespaces() -> None:
    """`import fragflow.nn`, `from fragflow.keras.layers import Dense`: the namespaces
    are importable by their public names as TensorFlow's are (they live in frontend/)."""
    names = {"nn": nn, "math": math, "image": image, "losses": losses, "linalg": linalg,
             "random": random, "train": train, "keras": keras, "layers": layers,
             "optim": optim, "initializers": initializers,
             "keras.layers": keras.layers, "keras.models": keras.models,
             "keras.optimizers": keras.optimizers, "keras.losses": keras.losses,
             "keras.initializers": keras.initializers}
    for name, module in names.items():
        _sys.modules.setdefault(f"{__name__}.{name}", module)


_register_namespaces()


def __getattr__(name):
    """A name fragflow lacks: AttributeError with fragflow's spelling where one exists
    (tf.get_variable -> ff.Variable, ...; docs/TENSORFLOW.md)."""
    if name.startswith("__"):
        raise AttributeError(f"module 'fragflow' has no attribute '{name}'")
    raise _missing("fragflow", name, __all__)


def __dir__():
    return sorted(set(__all__) | {"__version__"})
