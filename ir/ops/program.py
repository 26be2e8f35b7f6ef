"""User-written GPU programs (ff.gpgpu_program): an op whose kernel is the user's GLSL.

The node keeps everything needed to compile and re-infer it: the program's key in this
process's registry (for its output function, gradient and optional numpy reference),
its GLSL, input names, uniform declarations and values, and the output type it had
when built (used when the program is not registered, e.g. a graph loaded elsewhere)."""
from __future__ import annotations

from ..errors import AttrError, DTypeError, GraphError, ShapeError
from ..sanitize import InvalidNameError, identifier
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


_INT32 = (-2 ** 31, 2 ** 31 - 1)


def check_uniform(program: str, uniform: str, glsl_type: str, value):
    """value as the uniform's Python kind, if it fits the GLSL type (ints in int32)."""
    kind = UNIFORM_TYPES[glsl_type]
    if isinstance(value, bool) and kind is not bool or \
            not isinstance(value, (int, float, bool)) or \
            (kind is int and not isinstance(value, int)):
        raise DTypeError(f"program '{program}': uniform '{uniform}' is {glsl_type}, got "
                         f"{value!r}")
    if kind is int and not _INT32[0] <= value <= _INT32[1]:
        raise DTypeError(f"program '{program}': int uniform '{uniform}' = {value} is "
                         f"outside int32's range ({_INT32[0]}..{_INT32[1]})")
    return kind(value)


def check_names(attrs):
    """Every word of the program that becomes GLSL outside the user's code: input and
    uniform names (identifiers) and uniform types. Loaded graphs come through here."""
    name = attrs["name"]
    if not isinstance(name, str) or not name.replace("_", "").isalnum() \
            or not name.isascii():
        raise AttrError(f"program name {name!r} must be letters, digits and _")
    try:
        for input_name in attrs["inputs"]:
            identifier(input_name, f"program '{name}': input name")
        declared = dict(attrs["uniforms"])
        for uniform, glsl_type in declared.items():
            identifier(uniform, f"program '{name}': uniform name")
            if glsl_type not in UNIFORM_TYPES:
                raise AttrError(f"program '{name}': uniform '{uniform}' has type "
                                f"{glsl_type!r}; use one of {', '.join(UNIFORM_TYPES)}")
    except InvalidNameError as err:
        raise AttrError(str(err)) from None
    values = dict(attrs["uniform_values"])
    if set(values) != set(declared):
        raise AttrError(f"program '{name}': uniform values {sorted(values)} do not match "
                        f"the declared uniforms {sorted(declared)}")
    for uniform, value in values.items():
        check_uniform(name, uniform, declared[uniform], value)


def _infer(types, attrs):
    check_names(attrs)
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
               hidden_attrs=("key", "output_shape", "output_dtype", "uniforms"),
               doc="A user-written GLSL kernel (see ff.gpgpu_program).",
               tf="tf.js GPGPUProgram"))
