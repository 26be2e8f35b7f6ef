"""Keras's own layer classes that Keras Applications use and keras.layers does not
export: ConvNeXt's LayerScale and StochasticDepth (keras.src.applications.convnext) and
InceptionResNetV2's CustomScaleLayer (keras.src.applications.inception_resnet_v2).

They are not in ff.keras.layers (as they are not in keras.layers). A .keras file names
their module, and the file reader finds them by that module and class name, as Keras
registers them (keras_files/config.py, APPLICATION_LAYERS); an .h5 file names no module,
and there, as in Keras, custom_objects={"LayerScale": LayerScale} says which class is
meant. Their weights are named as Keras names them (LayerScale's gamma is Keras's
unnamed weight, "variable").

>>> import fragflow as ff
>>> from fragflow.frontend.layers_applications import LayerScale
>>> g = ff.Graph()
>>> with g.as_default():
...     y = LayerScale(1e-6, 4)(ff.placeholder((2, 3, 4)))
>>> y.shape
(2, 3, 4)
"""
from __future__ import annotations

from ..ir.errors import AttrError, ShapeError
from . import initializers as _init, ops as _ops
from .layers import Layer

__all__ = ["LayerScale", "StochasticDepth", "CustomScaleLayer"]


class LayerScale(Layer):
    """x * gamma, gamma a (projection_dim,) weight that starts at init_values
    (ConvNeXt's residual branches)."""

    keras_module = "keras.src.applications.convnext"

    def __init__(self, init_values, projection_dim, **kwargs):
        super().__init__(**kwargs)
        self.init_values, self.projection_dim = float(init_values), int(projection_dim)

    def build(self, input_shape):
        if input_shape[-1] is not None and input_shape[-1] != self.projection_dim:
            raise ShapeError(f"LayerScale '{self.name}': projection_dim is "
                             f"{self.projection_dim}, the input's last axis "
                             f"{input_shape[-1]}")
        self.gamma = self.add_weight("variable", (self.projection_dim,),
                                     _init.Constant(self.init_values))

    def call(self, x, training=False):
        return x * self.gamma


class StochasticDepth(Layer):
    """ConvNeXt's drop path: in training each example's x is dropped with probability
    drop_path_rate (the kept ones divided by 1 - drop_path_rate); at inference, x."""

    keras_module = "keras.src.applications.convnext"
    training_dependent = True

    def __init__(self, drop_path_rate, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= float(drop_path_rate) < 1.0:
            raise AttrError(f"StochasticDepth: drop_path_rate must be in [0, 1), got "
                            f"{drop_path_rate}")
        self.drop_path_rate = float(drop_path_rate)

    def call(self, x, training=False):
        if not training or self.drop_path_rate == 0.0:
            return x
        noise = [x.shape[0]] + [1] * (len(x.shape) - 1)       # None: the input's
        return _ops.dropout(x, self.drop_path_rate, noise_shape=noise)


class CustomScaleLayer(Layer):
    """inputs[0] + inputs[1] * scale (InceptionResNetV2's residual blocks)."""

    keras_module = "keras.src.applications.inception_resnet_v2"

    def __init__(self, scale, **kwargs):
        super().__init__(**kwargs)
        self.scale = float(scale)

    def call(self, inputs, training=False):
        if not isinstance(inputs, (list, tuple)) or len(inputs) != 2:
            raise ShapeError(f"CustomScaleLayer '{self.name}' takes a list of two "
                             f"tensors [x, residual]")
        return inputs[0] + inputs[1] * self.scale


# (Keras module, class name) -> class: what the Keras file reader looks up
APPLICATION_LAYERS = {(cls.keras_module, cls.__name__): cls
                      for cls in (LayerScale, StochasticDepth, CustomScaleLayer)}
