"""ff.image: tf.image's names on NHWC images (resize, flips, standardisation).

>>> import fragflow as ff, numpy as np
>>> g = ff.Graph()
>>> with g.as_default():
...     y = ff.image.resize(np.zeros((1, 2, 2, 3), np.float32), [4, 4])
>>> y.shape
(1, 4, 4, 3)
"""
from __future__ import annotations

from ...ir.errors import AttrError as _AttrError
from .. import ops as _ops
from ..ops_image import crop_and_resize
from ._missing import install as _install

resize_bilinear = _ops.resize_bilinear
resize_nearest_neighbor = _ops.resize_nearest_neighbor


class ResizeMethod:
    """tf.image.ResizeMethod's names that fragflow implements."""
    BILINEAR = "bilinear"
    NEAREST_NEIGHBOR = "nearest"


def resize(images, size, method="bilinear", preserve_aspect_ratio=False, antialias=False,
           name=None):
    """Resize NHWC images to size = (height, width), as TensorFlow 2's tf.image.resize
    (half-pixel centres). method: "bilinear" or "nearest"."""
    if preserve_aspect_ratio or antialias:
        raise _AttrError("image.resize: preserve_aspect_ratio and antialias are not "
                         "supported")
    method = str(method).lower()
    if method == "bilinear":
        return _ops.resize_bilinear(images, size, half_pixel_centers=True, name=name)
    if method in ("nearest", "nearest_neighbor"):
        return _ops.resize_nearest_neighbor(images, size, half_pixel_centers=True,
                                              name=name)
    raise _AttrError(f"image.resize: method {method!r} is not supported (bilinear, nearest)")


def resize_images(images, size, method=0, align_corners=False, name=None):
    """TensorFlow 1's tf.image.resize_images (method 0: bilinear, 1: nearest)."""
    if method in (0, "bilinear"):
        return _ops.resize_bilinear(images, size, align_corners=align_corners, name=name)
    if method in (1, "nearest", "nearest_neighbor"):
        return _ops.resize_nearest_neighbor(images, size, align_corners=align_corners,
                                              name=name)
    raise _AttrError(f"resize_images: method {method!r} is not supported (0, 1)")


def flip_left_right(image):
    """Mirror each image horizontally (the width axis, -2)."""
    return _ops.reverse(image, [-2])


def flip_up_down(image):
    """Mirror each image vertically (the height axis, -3)."""
    return _ops.reverse(image, [-3])


def per_image_standardization(image):
    """(x - mean) / max(stddev, 1 / sqrt(N)) over each image's H, W, C."""
    x = _ops.cast(image, "float32")
    axes = [-3, -2, -1]
    n = 1
    for d in x.shape[-3:]:
        n *= d
    mean = _ops.reduce_mean(x, axis=axes, keepdims=True)
    std = _ops.sqrt(_ops.reduce_mean(_ops.square(x - mean), axis=axes, keepdims=True))
    return (x - mean) / _ops.maximum(std, 1.0 / n ** 0.5)


__all__ = ["crop_and_resize", "resize", "resize_images", "resize_bilinear",
           "resize_nearest_neighbor", "ResizeMethod", "flip_left_right", "flip_up_down",
           "per_image_standardization"]
_install(globals(), "fragflow.image")
