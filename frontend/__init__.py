"""fragflow.frontend: what users write — tensors, op functions, sessions."""
from . import gradients as _gradients_module
from . import ops, ops_conv, ops_image, ops_math, ops_nn, ops_random, ops_structure
from .gradients import (custom_gradient, gradients, stop_gradient, value_and_gradients,
                        vjp)
from .ops import *  # noqa: F401,F403
from .program import GPGPUProgram, gpgpu_program
from .ops_conv import *  # noqa: F401,F403
from .ops_image import *  # noqa: F401,F403
from .ops_math import *  # noqa: F401,F403
from .ops_nn import *  # noqa: F401,F403
from .ops_random import *  # noqa: F401,F403
from .ops_structure import *  # noqa: F401,F403
from .session import CompiledFunction, Session
from .tensor import Tensor, Variable
from . import initializers, layers, optim
from .models import Input, Model, Sequential
# TensorFlow's extras and namespaces (docs/TENSORFLOW.md)
from . import ops_composite, ops_linalg, variables as _variables
from .ops_composite import *  # noqa: F401,F403
from .ops_linalg import *  # noqa: F401,F403
from .variables import *  # noqa: F401,F403
from .default_session import InteractiveSession, get_default_session
from .namespaces import image, keras, linalg, losses, math, nn, random, train

__all__ = [*ops.__all__, *ops_conv.__all__, *ops_image.__all__, *ops_math.__all__,
           *ops_nn.__all__, *ops_random.__all__, *ops_structure.__all__, *_gradients_module.__all__,
           "Session", "CompiledFunction", "gpgpu_program", "GPGPUProgram",
           "optim", "initializers", "layers", "Sequential",
           *ops_composite.__all__, *ops_linalg.__all__, *_variables.__all__,
           "Model", "Input", "get_default_session", "InteractiveSession",
           "image", "keras", "linalg", "losses", "math", "nn", "random", "train"]
