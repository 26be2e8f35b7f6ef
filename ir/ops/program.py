"""User-written GPU programs (ff.gpgpu_program): an op whose kernel is the user's GLSL.

The node keeps everything needed to compile and re-infer it: the program's key in this
process's registry (for its output function, gradient and optional numpy reference),
its GLSL, input names, uniform declarations and values, and the output type it had
when built (used when the program is not registered, e.g. a graph loaded elsewhere)."""
from __future__ import annotations

from ..errors import AttrError, DTypeError, GraphError, ShapeError
from ..types import DTYPES, TensorType
from .registry import REQUIRED, OpDef, register

# program key -> the frontend's program object (output fn, gradient, reference)
PROGRAMS: dict = {}
UNIFORM_TYPES = {"float": float, "int": int, "bool": bool}


def check_output(name, result) -> TensorType:
    """A program's output function must give (shape, dtype)."""
    try:
        shape, dtype = result
        shape = tuple(shape)
    except (TypeError, ValueError):
        raise ShapeError(f"program '{name}': its output function returned {result!r}, "
                         f"not (shape, dtype)") from None
    if any(d is not None and (not isinstance(d, int) or d < 0) for d in shape):
        raise ShapeError(f"program '{name}': output shape {shape} has a dimension that is "
                         f"not a non-negative int")
    if str(dtype) not in DTYPES:
        raise DTypeError(f"program '{name}': output dtype {dtype!r} is not one of "
                         f"{', '.join(DTYPES)}")
    if len(shape) > 4:
        raise ShapeError(f"program '{name}': outputs of rank {len(shape)} are not "
                         f"supported (rank 0 to 4)")
    return TensorType(shape, str(dtype))


def _infer(types, attrs):
    name = attrs["name"]
    if len(types) != len(attrs["inputs"]):
        raise AttrError(f"program '{name}' takes {len(attrs['inputs'])} input(s) "
                        f"({', '.join(attrs['inputs'])}), got {len(types)}")
    for t, input_name in zip(types, attrs["inputs"]):
        if t.rank > 4:
            raise ShapeError(f"program '{name}': input '{input_name}' has rank {t.rank}; "
                             f"programs read ranks 0 to 4")
    program = PROGRAMS.get(attrs["key"])
    if program is None:
        return TensorType(attrs["output_shape"], attrs["output_dtype"])
    return check_output(name, program.output(*types))


def _reference(arrays, attrs):
    program = PROGRAMS.get(attrs["key"])
    if program is None or program.reference is None:
        raise GraphError(f"program '{attrs['name']}' has no numpy reference (pass "
                         f"reference= to ff.gpgpu_program to run it on the numpy backend)")
    return program.reference(*arrays, **dict(attrs["uniform_values"]))


register(OpDef("gpgpu_program", "program", _infer, _reference,
               attrs={"key": REQUIRED, "name": REQUIRED, "glsl": REQUIRED,
                      "inputs": REQUIRED, "uniforms": (), "uniform_values": (),
                      "output_shape": REQUIRED, "output_dtype": REQUIRED},
               doc="A user-written GLSL kernel (see ff.gpgpu_program)."))
