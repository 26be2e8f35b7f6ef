"""User-facing functions of the image op family: TensorFlow 1's resize ops
(tf.compat.v1.image.resize_bilinear / resize_nearest_neighbor), NHWC."""
from __future__ import annotations

from ..ir.ops import image as _image
from .ops import _operands
from .tensor import _wrap

__all__ = ["resize_bilinear", "resize_nearest_neighbor"]


def resize_bilinear(images, size, align_corners=False, half_pixel_centers=False, name=None):
    """Resize images [batch, height, width, channels] to size = (new_height, new_width)
    by bilinear interpolation, with TensorFlow 1's coordinates (the output is float32;
    int32 images are converted).

    scale = (in - 1) / (out - 1) with align_corners (and out > 1), else in / out; an
    output pixel o samples the input at o * scale, or at (o + 0.5) * scale - 0.5 with
    half_pixel_centers (clamped to the image). align_corners and half_pixel_centers
    cannot both be True. `size` is a pair of Python ints (not a tensor).

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.resize_bilinear(np.array([0., 1.], np.float32).reshape(1, 1, 2, 1), (1, 4))
    >>> ff.Session(g, backend="numpy").run(y).ravel().tolist()
    [0.0, 0.5, 1.0, 1.0]
    """
    return _wrap(_image.resize("resize_bilinear", _operands(images)[0], size, align_corners,
                               half_pixel_centers, name=name))


def resize_nearest_neighbor(images, size, align_corners=False, half_pixel_centers=False,
                            name=None):
    """Resize images [batch, height, width, channels] (float32 or int32) to size =
    (new_height, new_width) by copying the nearest pixel, with TensorFlow 1's rules:
    index = floor(o * scale), round(o * scale) with align_corners, or
    floor((o + 0.5) * scale) with half_pixel_centers, clamped to the image (scale as
    in resize_bilinear).

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.resize_nearest_neighbor(np.arange(2, dtype=np.int32).reshape(1, 1, 2, 1),
    ...                                    (1, 4))
    >>> ff.Session(g, backend="numpy").run(y).ravel().tolist()
    [0, 0, 1, 1]
    """
    return _wrap(_image.resize("resize_nearest_neighbor", _operands(images)[0], size,
                               align_corners, half_pixel_centers, name=name))
