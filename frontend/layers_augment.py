"""Keras 3's image augmentation layers: RandomFlip, RandomRotation, RandomZoom,
RandomTranslation, RandomCrop, RandomContrast, RandomBrightness, RandomGrayscale,
RandomInvert, Solarization, and AutoContrast (which is not random).

At inference (predict, a loaded model's Session.run) each is what Keras 3.15 makes it:
its input unchanged (RandomCrop too: Keras 3 crops in training only), AutoContrast
its stretch. In training they augment with fragflow's Philox random ops under Keras's
parameter semantics (factor ranges, fill_mode, interpolation, value_range): the same
distributions as Keras's, not the same draws (docs/KERAS.md). fragflow's random ops
take static shapes, so a draw per example of a batch of unknown size is built from a
dropout of ones (which takes its shape from its input): 24 Bernoulli(1/2) bits per
value, a uniform on the same 2^-24 grid as ff.random_uniform's.

>>> import fragflow as ff, numpy as np
>>> g = ff.Graph()
>>> with g.as_default():
...     x = ff.placeholder((None, 4, 4, 3), name="x")
...     y = ff.keras.layers.RandomFlip("horizontal", seed=1)(x, training=True)
>>> img = np.arange(48, dtype=np.float32).reshape(1, 4, 4, 3)
>>> out = ff.Session(g, backend="numpy").run(y, {x: img})
>>> bool((out == img).all() or (out == img[:, :, ::-1]).all())
True
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.errors import AttrError, ShapeError
from . import ops as _ops
from .layers import Layer, export

__all__ = ["RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation", "RandomCrop",
           "RandomContrast", "RandomBrightness", "RandomGrayscale", "RandomInvert",
           "Solarization", "AutoContrast"]

FILL_MODES = ("reflect", "wrap", "constant", "nearest")
INTERPOLATIONS = ("bilinear", "nearest")
_BITS = 24                               # the bits of a uniform draw, as random_uniform's


# -- argument checks (Keras's rules, with fragflow's errors) --------------------------
def _where(layer) -> str:
    return f"{type(layer).__name__} '{layer.name}'"


def _number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and \
        not isinstance(value, bool)


def _range(layer, what, value, bounds, signed=True, open_low=False, base=False) -> tuple:
    """(lower, upper) of a Keras factor: a number f gives (-|f|, |f|) (signed) or
    (0, f), clipped below at bounds[0] as Keras's base layer does; a pair is sorted.
    Values outside bounds are refused naming the layer, the argument and the value; a
    pair of Keras's base layer (base: RandomRotation, RandomContrast, RandomBrightness,
    RandomInvert) only where it misses the bounds altogether, as Keras checks it."""
    lo, hi = bounds

    def outside(v):
        return not _number(v) or v > hi or (v <= lo if open_low else v < lo)

    if isinstance(value, (list, tuple)):
        if len(value) != 2 or not all(_number(v) for v in value) or (
                value[0] > hi or value[1] < lo if base else any(outside(v) for v in value)):
            raise AttrError(f"{_where(layer)}: {what} must be a number or a pair of "
                            f"numbers in [{lo}, {hi}], got {value!r}")
        return tuple(sorted(float(v) for v in value))
    if outside(value):
        raise AttrError(f"{_where(layer)}: {what} must be a number or a pair of numbers "
                        f"in [{lo}, {hi}], got {value!r}")
    value = abs(float(value)) if signed else float(value)
    return (max(-value, lo) if signed else 0.0, value)


def _value_range(layer, value_range) -> tuple:
    if not isinstance(value_range, (list, tuple)) or len(value_range) != 2 or \
            not all(_number(v) for v in value_range):
        raise AttrError(f"{_where(layer)}: value_range must be a pair of numbers, got "
                        f"{value_range!r}")
    return value_range


def _choice(layer, what, value, allowed) -> str:
    if value not in allowed:
        raise AttrError(f"{_where(layer)}: {what} {value!r} is not supported (one of "
                        f"{', '.join(allowed)})")
    return value


def _image_shape(layer, shape, known=True) -> None:
    if len(shape) not in (3, 4) or (known and any(d is None for d in shape[-3:])):
        raise ShapeError(f"{_where(layer)} needs (N,) H, W, C images of known height, width "
                         f"and channels, got {list(shape)}")


# -- random draws ------------------------------------------------------------------------
def _uniform(images, count, lo, hi, seed):
    """[N, count] float32 uniform in [lo, hi), N the batch of images (known or not)."""
    column = _ops.reshape(images[:, 0, 0, 0], (-1, 1, 1))
    ones = _ops.ones_like(column) * _ops.constant(np.ones((1, count, _BITS), np.float32))
    bits = _ops.dropout(ones, 0.5, seed=seed) * 0.5               # each 0 or 1, p = 1/2
    weights = np.ldexp(1.0, -np.arange(1, _BITS + 1)).astype(np.float32)
    unit = _ops.reduce_sum(bits * _ops.constant(weights), axis=-1)   # [N, count] in [0, 1)
    return unit * float(hi - lo) + float(lo) if (lo, hi) != (0.0, 1.0) else unit


def _per_image(t):
    """[N] or [N, 1] per-image values as [N, 1, 1, 1], to broadcast over images."""
    return _ops.reshape(t, (-1, 1, 1, 1))


class _Augmentation(Layer):
    """An image layer that is its input at inference: call builds `augment` on 4-D
    images in training (a single 3-D image as a batch of one)."""
    channels_first_ok = True
    training_dependent = True
    needs_size = False               # whether training needs H, W and C known

    def __init__(self, seed=None, data_format=None, bounding_box_format=None, **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        if seed is not None and (not _number(seed) or int(seed) != seed):
            raise AttrError(f"{_where(self)}: seed must be an int or None, got {seed!r}")
        self.seed = None if seed is None else int(seed)
        self.bounding_box_format = bounding_box_format

    def build(self, input_shape):
        _image_shape(self, input_shape, known=False)

    def call(self, x, training=False):
        if not training:
            return x
        _image_shape(self, x.shape, known=self.needs_size)
        if len(x.shape) == 3:
            return _ops.squeeze(self.augment(_ops.expand_dims(x, 0)), [0])
        return self.augment(x)

    def augment(self, images):
        raise NotImplementedError

    def uniform(self, images, count, lo, hi):
        return _uniform(images, count, lo, hi, self.seed)

    def get_config(self):
        config = super().get_config()
        if config.get("bounding_box_format") is None:
            config.pop("bounding_box_format", None)
        return config


# -- flips and crops ----------------------------------------------------------------------
class RandomFlip(_Augmentation):
    """Each image flipped with probability 1/2: left-right ("horizontal"), top-bottom
    ("vertical") or, with one draw for both, both ("horizontal_and_vertical")."""

    def __init__(self, mode="horizontal_and_vertical", seed=None, data_format=None,
                 **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.mode = _choice(self, "mode", mode,
                            ("horizontal", "vertical", "horizontal_and_vertical"))

    def augment(self, images):
        flip = _ops.greater(_per_image(self.uniform(images, 1, 0.0, 1.0)), 0.5)
        out = images
        if self.mode != "vertical":
            out = _ops.where(flip, _ops.reverse(out, [2]), out)
        if self.mode != "horizontal":
            out = _ops.where(flip, _ops.reverse(out, [1]), out)
        return out


class RandomCrop(_Augmentation):
    """In training, one random (height, width) window of the batch (Keras draws one
    offset per batch); where the images are not larger both ways, Keras's centred
    crop resized (bilinear) to (height, width). At inference the input as it is:
    Keras 3 crops in training only."""
    needs_size = True

    def __init__(self, height, width, seed=None, data_format=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        for what, v in (("height", height), ("width", width)):
            if not _number(v) or int(v) != v or v < 1:
                raise AttrError(f"{_where(self)}: {what} must be a positive int, got {v!r}")
        self.height, self.width = int(height), int(width)

    def augment(self, images):
        _, h, w, _ = images.shape
        if h > self.height and w > self.width:
            with images.graph.as_default():
                start = _ops.cast(_ops.random_uniform((2,), 0.0, 1.0, seed=self.seed)
                                  * _ops.constant(np.array([h - self.height + 1,
                                                            w - self.width + 1],
                                                           np.float32)), "int32")
                rows = start[0] + _ops.constant(np.arange(self.height, dtype=np.int32))
                cols = start[1] + _ops.constant(np.arange(self.width, dtype=np.int32))
            return _ops.gather(_ops.gather(images, rows, axis=1), cols, axis=2)
        crop_h = max(min(h, int(float(w * self.height) / self.width)), 1)
        crop_w = max(min(w, int(float(h * self.width) / self.height)), 1)
        top, left = int(float(h - crop_h) / 2), int(float(w - crop_w) / 2)
        out = images[:, top:top + self.height, left:left + self.width, :]
        if tuple(out.shape[1:3]) != (self.height, self.width):
            out = _ops.resize_bilinear(out, (self.height, self.width),
                                       half_pixel_centers=True)
        return out


# -- affine transforms --------------------------------------------------------------------
def _fix_index(i, size, fill_mode):
    """Keras's index fixers (int32): where a sample outside [0, size) reads."""
    if fill_mode in ("constant", "nearest"):
        return _ops.clip_by_value(i, 0, size - 1)
    if fill_mode == "wrap":
        return _ops.floormod(i, size)
    # reflect: (|(2i + 1 + 2 size) mod 4 size - 2 size| - 1) // 2, the edge repeated
    mirrored = _ops.abs(_ops.floormod(2 * i + (1 + 2 * size), 4 * size) - 2 * size)
    return _ops.floor_div(mirrored - 1, 2)


def _nodes(coord, interpolation):
    """[(int32 index, weight or None)]: where one axis's sample reads, and how much."""
    if interpolation == "nearest":
        return [(_ops.cast(_ops.round(coord), "int32"), None)]
    lower = _ops.floor(coord)
    upper = coord - lower
    index = _ops.cast(lower, "int32")
    return [(index, 1.0 - upper), (index + 1, upper)]


def affine_transform(images, coefficients, interpolation, fill_mode, fill_value):
    """Keras's affine_transform of NHWC images (static H, W, C): output pixel (y, x)
    reads the input at (b0 x + b1 y + b2, a0 x + a1 y + a2), each coefficient a
    [N, 1, 1] tensor, by nearest or bilinear interpolation; samples outside the image
    read by fill_mode (constant: fill_value)."""
    a0, a1, a2, b0, b1, b2 = coefficients
    _, h, w, c = images.shape
    ys = _ops.constant(np.arange(h, dtype=np.float32).reshape(1, h, 1))
    xs = _ops.constant(np.arange(w, dtype=np.float32).reshape(1, 1, w))
    src_y = b0 * xs + b1 * ys + b2                       # [N, H, W]
    src_x = a0 * xs + a1 * ys + a2
    flat = _ops.reshape(images, (-1, h * w, c))
    out = None
    for iy, wy in _nodes(src_y, interpolation):
        for ix, wx in _nodes(src_x, interpolation):
            index = _fix_index(iy, h, fill_mode) * w + _fix_index(ix, w, fill_mode)
            value = _ops.reshape(_ops.gather(flat, _ops.reshape(index, (-1, h * w)),
                                             axis=1, batch_dims=1), (-1, h, w, c))
            if fill_mode == "constant":
                inside = _ops.logical_and(
                    _ops.logical_and(_ops.greater_equal(iy, 0), _ops.less(iy, h)),
                    _ops.logical_and(_ops.greater_equal(ix, 0), _ops.less(ix, w)))
                value = _ops.where(_ops.expand_dims(inside, -1), value, float(fill_value))
            weights = [t for t in (wy, wx) if t is not None]
            if weights:
                weight = weights[0] if len(weights) == 1 else weights[0] * weights[1]
                value = _ops.expand_dims(weight, -1) * value
            out = value if out is None else out + value
    return out


class _Affine(_Augmentation):
    """RandomRotation, RandomZoom, RandomTranslation: a random affine map per image."""
    needs_size = True

    def __init__(self, fill_mode="reflect", interpolation="bilinear", seed=None,
                 fill_value=0.0, data_format=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.fill_mode = _choice(self, "fill_mode", fill_mode, FILL_MODES)
        self.interpolation = _choice(self, "interpolation", interpolation, INTERPOLATIONS)
        if not _number(fill_value):
            raise AttrError(f"{_where(self)}: fill_value must be a number, got "
                            f"{fill_value!r}")
        self.fill_value = float(fill_value)

    def augment(self, images):
        coefficients = [_ops.reshape(t, (-1, 1, 1)) for t in self.coefficients(images)]
        return affine_transform(images, coefficients, self.interpolation, self.fill_mode,
                                self.fill_value)

    def coefficients(self, images):
        """[a0, a1, a2, b0, b1, b2], each [N, 1] or a number."""
        raise NotImplementedError


class RandomRotation(_Affine):
    """Each image rotated about its centre by an angle drawn uniformly from factor *
    360 degrees (factor f: [-f, f]; a pair: [lower, upper]; in [-1, 1])."""

    def __init__(self, factor, fill_mode="reflect", interpolation="bilinear", seed=None,
                 fill_value=0.0, data_format=None, **kwargs):
        super().__init__(fill_mode, interpolation, seed, fill_value, data_format, **kwargs)
        self.factor = _range(self, "factor", factor, (-1.0, 1.0), base=True)

    def coefficients(self, images):
        _, h, w, _ = images.shape
        lo, hi = self.factor
        angle = self.uniform(images, 1, lo * 360.0, hi * 360.0) * (math.pi / 180.0)
        cos, sin = _ops.cos(angle), _ops.sin(angle)
        cx, cy = 0.5 * (w - 1), 0.5 * (h - 1)
        return [cos, -sin, cx - cx * cos + cy * sin,
                sin, cos, cy - cx * sin - cy * cos]


class RandomZoom(_Affine):
    """Each image zoomed about its centre: height scaled by 1 + a draw from
    height_factor (f: [-f, f]; a pair; in (-1, 1]: positive zooms out), width by one
    from width_factor, or by the height's draw when width_factor is None."""

    def __init__(self, height_factor, width_factor=None, fill_mode="reflect",
                 interpolation="bilinear", seed=None, fill_value=0.0, data_format=None,
                 **kwargs):
        super().__init__(fill_mode, interpolation, seed, fill_value, data_format, **kwargs)
        self._height = _range(self, "height_factor", height_factor, (-1.0, 1.0),
                              open_low=True)
        self._width = None if width_factor is None else \
            _range(self, "width_factor", width_factor, (-1.0, 1.0), open_low=True)
        self.height_factor, self.width_factor = height_factor, width_factor

    def coefficients(self, images):
        _, h, w, _ = images.shape
        zy = self.uniform(images, 1, 1.0 + self._height[0], 1.0 + self._height[1])
        zx = zy if self._width is None else \
            self.uniform(images, 1, 1.0 + self._width[0], 1.0 + self._width[1])
        return [zx, 0.0, (w - 1) / 2.0 * (1.0 - zx), 0.0, zy, (h - 1) / 2.0 * (1.0 - zy)]


class RandomTranslation(_Affine):
    """Each image shifted by a draw from height_factor times its height and one from
    width_factor times its width (f: [-f, f]; a pair; in [-1, 1])."""

    def __init__(self, height_factor, width_factor, fill_mode="reflect",
                 interpolation="bilinear", seed=None, fill_value=0.0, data_format=None,
                 **kwargs):
        super().__init__(fill_mode, interpolation, seed, fill_value, data_format, **kwargs)
        self._height = _range(self, "height_factor", height_factor, (-1.0, 1.0))
        self._width = _range(self, "width_factor", width_factor, (-1.0, 1.0))
        self.height_factor, self.width_factor = height_factor, width_factor

    def coefficients(self, images):
        _, h, w, _ = images.shape
        ty = self.uniform(images, 1, *self._height) * float(h)
        tx = self.uniform(images, 1, *self._width) * float(w)
        return [1.0, 0.0, -tx, 0.0, 1.0, -ty]


# -- colour ---------------------------------------------------------------------------------
class RandomContrast(_Augmentation):
    """Each image's contrast scaled about its per-channel mean by a draw from
    [1 - lower, 1 + upper] (factor f: lower 0, upper f, as Keras 3.15 reads it; a
    pair: as given; in [0, 1]), then clipped to value_range."""

    def __init__(self, factor, value_range=(0, 255), seed=None, **kwargs):
        super().__init__(seed=seed, **kwargs)
        self.factor = _range(self, "factor", factor, (0.0, 1.0), base=True)
        self.value_range = _value_range(self, value_range)

    def augment(self, images):
        lo, hi = self.factor
        factor = _per_image(self.uniform(images, 1, 1.0 - lo, 1.0 + hi))
        mean = _ops.reduce_mean(images, axis=[1, 2], keepdims=True)
        return _ops.clip_by_value((images - mean) * factor + mean,
                                  float(self.value_range[0]), float(self.value_range[1]))


class RandomBrightness(_Augmentation):
    """A draw from factor (f: [-f, f]; a pair; in [-1, 1]) times the width of
    value_range added to each image, then clipped to value_range."""

    def __init__(self, factor, value_range=(0, 255), seed=None, **kwargs):
        super().__init__(seed=seed, **kwargs)
        self.factor = _range(self, "factor", factor, (-1.0, 1.0), base=True)
        self.value_range = sorted(_value_range(self, value_range))

    def augment(self, images):
        v0, v1 = (float(v) for v in self.value_range)
        delta = self.uniform(images, 1, *self.factor) * (v1 - v0)
        return _ops.clip_by_value(images + _per_image(delta), v0, v1)


class RandomGrayscale(_Augmentation):
    """Each RGB image made grey (0.2989 R + 0.587 G + 0.114 B in every channel) with
    probability factor."""

    def __init__(self, factor=0.5, data_format=None, seed=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        if not _number(factor) or not 0.0 <= factor <= 1.0:
            raise AttrError(f"{_where(self)}: factor must be in [0, 1], got {factor!r}")
        self.factor = factor

    def get_config(self):
        config = super().get_config()
        config.pop("seed")               # Keras's config of it has none
        return config

    def build(self, input_shape):
        super().build(input_shape)
        if input_shape[-1] != 3:
            raise ShapeError(f"{_where(self)} needs RGB images (3 channels), got "
                             f"{list(input_shape)}")

    def augment(self, images):
        apply = _ops.less(_per_image(self.uniform(images, 1, 0.0, 1.0)), float(self.factor))
        grey = _ops.reduce_sum(images * _ops.constant(
            np.array([0.2989, 0.587, 0.114], np.float32)), axis=-1, keepdims=True)
        return _ops.where(apply, grey, images)


class RandomInvert(_Augmentation):
    """Each image inverted (value_range's upper end minus the image) with a probability
    drawn per image from factor (f: [0, f]; a pair; in [0, 1])."""

    def __init__(self, factor=1.0, value_range=(0, 255), seed=None, data_format=None,
                 **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.factor = _range(self, "factor", factor, (0.0, 1.0), base=True)
        self.value_range = _value_range(self, value_range)

    def augment(self, images):
        draws = self.uniform(images, 2, 0.0, 1.0)
        lo, hi = self.factor
        probability = draws[:, 0] * (hi - lo) + lo
        apply = _per_image(_ops.less(draws[:, 1], probability))
        return _ops.where(apply, float(self.value_range[1]) - images, images)


def _to_range(images, source, target):
    """Keras's _transform_value_range: values mapped linearly from source to target."""
    if tuple(source) == tuple(target):
        return images
    s0, s1 = (float(v) for v in source)
    t0, t1 = (float(v) for v in target)
    return (images - s0) / (s1 - s0) * (t1 - t0) + t0


class Solarization(_Augmentation):
    """In [0, 255] terms: a draw from [lower, 255 upper] of addition_factor added and
    clipped to [0, 255]; values at or above a draw from [lower, 255 upper] of
    threshold_factor become 255 - value (factors f: [0, f]; pairs; in [0, 1]; Keras
    3.15 scales only the upper ends by 255)."""

    def __init__(self, addition_factor=0.0, threshold_factor=0.0, value_range=(0, 255),
                 seed=None, **kwargs):
        super().__init__(seed=seed, **kwargs)
        self.addition_factor = _range(self, "addition_factor", addition_factor,
                                      (0.0, 1.0), signed=False)
        self.threshold_factor = _range(self, "threshold_factor", threshold_factor,
                                       (0.0, 1.0), signed=False)
        self.value_range = sorted(_value_range(self, value_range))

    def augment(self, images):
        add = _per_image(self.uniform(images, 1, self.addition_factor[0],
                                      self.addition_factor[1] * 255.0))
        threshold = _per_image(self.uniform(images, 1, self.threshold_factor[0],
                                            self.threshold_factor[1] * 255.0))
        values = _ops.clip_by_value(_to_range(images, self.value_range, (0, 255)) + add,
                                    0.0, 255.0)
        values = _ops.where(_ops.less(values, threshold), values, 255.0 - values)
        return _to_range(values, (0, 255), self.value_range)


class AutoContrast(Layer):
    """Each channel of each image stretched to fill value_range (its minimum to the
    lower end, its maximum to the upper end), at inference as in training (it is not
    random); a channel of one value is left as it is."""

    def __init__(self, value_range=(0, 255), **kwargs):
        super().__init__(**kwargs)
        self.value_range = sorted(_value_range(self, value_range))

    def build(self, input_shape):
        _image_shape(self, input_shape, known=False)

    def get_config(self):
        return {**super().get_config(), "data_format": "channels_last"}

    def call(self, x, training=False):
        images = _to_range(x, self.value_range, (0, 255))
        axes = [len(x.shape) - 3, len(x.shape) - 2]
        low = _ops.reduce_min(images, axis=axes, keepdims=True)
        high = _ops.reduce_max(images, axis=axes, keepdims=True)
        # Keras divides by high - low and keeps the input where that made NaN (a channel
        # of one value); the same without the NaN, which GL does not promise to make
        spread = _ops.where(_ops.greater(high, low), high - low, _ops.ones_like(high))
        scale = 255.0 / spread
        stretched = _ops.clip_by_value(images * scale - low * scale, 0.0, 255.0)
        out = _to_range(stretched, (0, 255), self.value_range)
        return _ops.where(_ops.greater(high, low), out, x)


export(__all__, globals())
