"""Every error fragflow raises on purpose is a FragflowError.

They live in the lowest layer so that every layer can raise them. Messages say what
was wrong, where (node, scope, the user's file:line) and, when it helps, what to do.
"""


class FragflowError(Exception):
    """Base class of all fragflow errors."""


class DTypeError(FragflowError, TypeError):
    """An unknown dtype, or an op given a dtype it does not accept."""


class ShapeError(FragflowError, ValueError):
    """Shapes that do not fit together (broadcasting, matmul, reshape...)."""


class AttrError(FragflowError, ValueError):
    """An op attribute that is missing, unknown or out of range."""


class GraphError(FragflowError):
    """Misuse of graphs: tensors from two graphs, a name that is not there."""


class FeedError(FragflowError, ValueError):
    """A feed with the wrong shape or dtype, for another graph, or one that is missing."""


class FetchError(FragflowError, ValueError):
    """A fetch that is not a tensor of the session's graph."""


class GradientError(FragflowError):
    """An op without a gradient rule, or a gradient asked of an integer tensor."""


class SerializationError(FragflowError, ValueError):
    """A saved graph or checkpoint that cannot be read."""


class BackendError(FragflowError, RuntimeError):
    """No OpenGL context could be created, or a GL call failed."""


class SessionClosedError(FragflowError, RuntimeError):
    """A Session used after close(): run, compile, get, set, save and restore refuse."""


class ShaderCompileError(BackendError):
    """A generated (or user-written) shader did not compile or link."""


class TensorTooLargeError(FragflowError, ValueError):
    """A tensor that does not fit in the GPU's largest texture."""


class TooManyInputsError(FragflowError, ValueError):
    """A kernel that would read more textures than the GPU binds at once
    (GL_MAX_TEXTURE_IMAGE_UNITS), e.g. a gpgpu_program with too many inputs."""


class LoopLimitWarning(UserWarning):
    """A user GLSL loop known to run past llvmpipe's 65,535 iterations per invocation
    (llvmpipe ends it there, silently)."""


class NumericsError(FragflowError, ArithmeticError):
    """Debug mode found NaN or Inf: names the first node that produced it."""


class SymbolicTensorError(FragflowError, TypeError):
    """A graph tensor used where a value is needed (numpy functions, np.asarray): it
    has a value only when a Session runs it."""
