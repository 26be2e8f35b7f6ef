"""fragflow.frontend: what users write — tensors, op functions, sessions."""
from . import (
    control_flow as _control_flow,
    gpt2 as _gpt2,
    gradients as _gradients_module,
    initializers,
    layers,
    # Keras's layers by family, each module adding its layers to ff.layers
    layers_activation as _layers_activation,
    layers_attention as _layers_attention,
    layers_augment as _layers_augment,
    layers_conv as _layers_conv,
    layers_merge as _layers_merge,
    layers_noise as _layers_noise,
    layers_norm as _layers_norm,
    layers_preprocessing as _layers_preprocessing,
    layers_reshape as _layers_reshape,
    layers_rnn as _layers_rnn,  # SimpleRNN, LSTM, GRU into ff.layers
    ops,
    optim,
    tf1 as _tf1,
    variables as _variables,
)
from .control_flow import *  # noqa: F401,F403  (tf.while_loop, tf.cond, tf.scan, ...)
from .default_session import InteractiveSession, get_default_session
from .gpt2 import GPT2Decoder, gpt2_decoder, sample_logits
from .gradients import custom_gradient, gradients, stop_gradient, value_and_gradients, vjp
from .models import Input, Model, Sequential
from .namespaces import (  # docs/TENSORFLOW.md
    image,
    keras,
    linalg,
    losses,
    math,
    nn,
    random,
    summary,
    train,
)
from .namespaces.summary import Summary
from .ops import *  # noqa: F401,F403
from .program import GPGPUProgram, gpgpu_program
from .session import CompiledFunction, Session
from .tensor import Tensor, Variable
from .tf1 import *  # noqa: F401,F403  (TF1's idioms: variable_scope, group, ...)
from .variables import *  # noqa: F401,F403

__all__ = [*ops.__all__, *_gradients_module.__all__,
           "Session", "CompiledFunction", "gpgpu_program", "GPGPUProgram",
           "optim", "initializers", "layers", "Sequential",
           *_variables.__all__,
           "Model", "Input", "get_default_session", "InteractiveSession",
           "image", "keras", "linalg", "losses", "math", "nn", "random", "train", "summary",
           "Summary",
           *_tf1.__all__, *_control_flow.__all__, *_gpt2.__all__]
