"""fragflow.frontend: what users write — tensors, op functions, sessions."""
from . import gradients as _gradients_module
from . import ops
from .gradients import (custom_gradient, gradients, stop_gradient, value_and_gradients,
                        vjp)
from .ops import *  # noqa: F401,F403
from .program import GPGPUProgram, gpgpu_program
from .session import CompiledFunction, Session
from .tensor import Tensor, Variable
from . import initializers, layers, optim
from .models import Input, Model, Sequential
# TensorFlow's extras and namespaces (docs/TENSORFLOW.md)
from . import variables as _variables
from .variables import *  # noqa: F401,F403
from .default_session import InteractiveSession, get_default_session
from .namespaces import image, keras, linalg, losses, math, nn, random, train

__all__ = [*ops.__all__, *_gradients_module.__all__,
           "Session", "CompiledFunction", "gpgpu_program", "GPGPUProgram",
           "optim", "initializers", "layers", "Sequential",
           *_variables.__all__,
           "Model", "Input", "get_default_session", "InteractiveSession",
           "image", "keras", "linalg", "losses", "math", "nn", "random", "train"]
