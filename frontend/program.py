"""ff.gpgpu_program: your own GLSL as a graph op, with your own gradient.

A program is an op like any other: it is pruned, dumped, profiled, differentiated,
compiled once per shape and reused across runs and sessions (the program cache).

`gpgpu_program`'s docstring gives the contract: what the GLSL sees, loops, gradients."""
from __future__ import annotations

import itertools

from ..ir.errors import AttrError, GradientError
from ..ir.graph import get_default_graph
from ..ir.ops.common import apply
from ..ir.ops.program import PROGRAMS, UNIFORM_TYPES, check_output, check_uniform
from ..ir.program_loops import check_program_loops
from ..ir.sanitize import InvalidNameError, identifier
from ..ir.types import TensorType
from ..passes.autodiff import program as _autodiff_program
from .tensor import as_tensor_value, wrap

_keys = itertools.count()


class GPGPUProgram:
    def __init__(self, name, inputs, output, glsl, uniforms=None, gradient=None,
                 reference=None):
        if not name or not name.replace("_", "").isalnum():
            raise AttrError(f"program name {name!r} must be letters, digits and _")
        self.name = name
        self.inputs = tuple(inputs)
        for input_name in self.inputs:
            if not isinstance(input_name, str):
                raise AttrError(f"program '{name}': inputs are the names the GLSL uses "
                                f"(inputs=['x', 'bias']), got {input_name!r}; pass the "
                                f"tensors when calling the program")
            try:
                identifier(input_name, f"program '{name}': input name")
            except InvalidNameError as err:
                raise AttrError(str(err)) from None
        self.output = output
        self.glsl = glsl
        self.uniforms = dict(uniforms or {})
        for uniform, glsl_type in self.uniforms.items():
            try:
                identifier(uniform, f"program '{name}': uniform name")
            except InvalidNameError as err:
                raise AttrError(str(err)) from None
            if glsl_type not in UNIFORM_TYPES:
                raise AttrError(f"program '{name}': uniform '{uniform}' has type "
                                f"{glsl_type!r}; use one of {', '.join(UNIFORM_TYPES)}")
        self.gradient = gradient
        self.reference = reference
        # one registry entry per program: its gradient's programs are built once, here
        self.key = f"{name}#{next(_keys)}"
        PROGRAMS[self.key] = self

    def _uniform_values(self, given: dict) -> tuple:
        unknown = set(given) - set(self.uniforms)
        if unknown:
            raise AttrError(f"program '{self.name}' has no uniform(s) {sorted(unknown)}; "
                            f"it declares {sorted(self.uniforms) or 'none'}")
        values = []
        for uniform, glsl_type in self.uniforms.items():
            if uniform not in given:
                raise AttrError(f"program '{self.name}': uniform '{uniform}' "
                                f"({glsl_type}) needs a value: {self.name}(..., "
                                f"{uniform}=...)")
            values.append((uniform, check_uniform(self.name, uniform, glsl_type,
                                                  given[uniform])))
        return tuple(values)

    def __call__(self, *args, name=None, **uniform_values):
        if len(args) != len(self.inputs):
            raise AttrError(f"program '{self.name}' takes {len(self.inputs)} input(s) "
                            f"({', '.join(self.inputs)}), got {len(args)}")
        values = [as_tensor_value(a) for a in args]
        graph = values[0].graph if values else get_default_graph()
        out_type = check_output(self.name, self.output(*[v.type for v in values]))
        attrs = {"key": self.key, "name": self.name, "glsl": self.glsl,
                 "inputs": self.inputs, "uniforms": tuple(self.uniforms.items()),
                 "uniform_values": self._uniform_values(uniform_values),
                 "output_shape": out_type.shape, "output_dtype": out_type.dtype}
        result = apply("gpgpu_program", values, attrs, name or self.name, graph)
        node = result.node
        # warn now, at the user's line, when the loops' bounds are already known
        check_program_loops(node.attrs, [v.shape for v in values], out_type.shape,
                            node.source)
        return wrap(result)

    def __repr__(self):
        return f"<ff.gpgpu_program {self.name}({', '.join(self.inputs)})>"


def gpgpu_program(name, inputs, output, glsl, uniforms=None, gradient=None,
                  reference=None) -> GPGPUProgram:
    """A graph op running your GLSL.

        square_add = ff.gpgpu_program(
            name="square_add",
            inputs=["x"],
            output=lambda x: (x.shape, x.dtype),          # shape/dtype inference
            glsl='''
                float v = getXAtOutCoords();
                setOutput(v * v + v);
            ''',
            gradient=lambda x, y, dy: [dy * (2.0 * x + 1.0)],
        )
        y = square_add(x)

    The GLSL is the body of a function run once per output element (GLSL 330). It sees:

    - getOutputCoords(): this element's coordinates — int for rank 0 and 1 outputs,
      ivec2/ivec3/ivec4 for ranks 2-4 (row-major: .x is the first dimension).
    - setOutput(v): the element's value (float, int or bool, per the output dtype).
    - get<Name>(c0, ..., cN): input <Name> (first letter upper-cased: "x" → getX,
      "bias" → getBias) at coordinates given as one int per dimension.
    - get<Name>AtOutCoords(): the input at the output's coordinates, with numpy
      broadcasting (the input's dimensions align with the output's last ones).
    - outShape, <name>Shape (int or ivecN), outSize, <name>Size: the shapes, as constants.
    - each uniform by its name, set per call: prog(x, scale=2.0).

    Loops: llvmpipe (Mesa's CPU driver, what runs fragflow where there is no GPU) ends a
    shader invocation's loops after 65,535 iterations in all, silently: the output is
    whatever the loops had computed by then. An invocation computes up to four output
    elements, so keep each element's loops (nested loops multiply, all loops add up)
    under about 16,380 iterations; split longer work over more output elements or several
    programs. A LoopLimitWarning is raised when the program is called (and again when it
    is compiled, once shapes are known) if `for` bounds made of literals, `const` names,
    uniforms and shape constants are known to go past this. GPU drivers have no such limit.
    A program reads at most GL_MAX_TEXTURE_IMAGE_UNITS inputs (16 on any GL 3.3; more
    raises TooManyInputsError when it is compiled). See docs/LIMITS.md.

    Inputs and outputs have rank 0 to 4. `gradient(*inputs, y, dy, **uniforms)` returns
    one gradient per input (graph ops or other programs; None for none); without it,
    differentiating through the program raises GradientError naming it.
    `reference(*arrays, **uniforms)` (numpy) lets the numpy backend run the program."""
    return GPGPUProgram(name, inputs, output, glsl, uniforms, gradient, reference)


def program_gradient(node, dy):
    """The gradient rule of every program: the user's gradient function."""
    program = PROGRAMS.get(node.attrs["key"])
    if program is None or program.gradient is None:
        raise GradientError(f"program '{node.attrs['name']}' ({node.name}"
                            f"{', ' + node.source if node.source else ''}) has no gradient: "
                            f"pass gradient=... to ff.gpgpu_program")
    grads = program.gradient(*[wrap(v) for v in node.inputs], wrap(node.outputs[0]),
                             wrap(dy), **dict(node.attrs["uniform_values"]))
    grads = list(grads) if isinstance(grads, (list, tuple)) else [grads]
    if len(grads) != len(node.inputs):
        raise GradientError(f"program '{program.name}': its gradient returned "
                            f"{len(grads)} value(s) for {len(node.inputs)} input(s)")
    return [None if g is None else as_tensor_value(g) for g in grads]


_autodiff_program.HOOK["rule"] = program_gradient
del TensorType
__all__ = ["gpgpu_program", "GPGPUProgram"]
