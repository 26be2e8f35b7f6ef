"""ff.keras.layers' augmentation layers in training, by their properties (the draws
are Philox's, not Keras's: tests/keras_files/test_keras_augmentation.py compares
with Keras where a draw is fixed): a flip is a flip of the input, a rotation by 0 the
input, draws within Keras's ranges and spread over them, one draw per image, seeds
reproducible across sessions and backends, batches of any size, single images,
channels_first; at inference the input itself; bad arguments and inputs refused
naming the layer and the value."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.frontend.layers import layer_from_config
from tests.reference import assert_matches, run_both

L = ff.keras.layers
rng = np.random.default_rng(21)
IMAGES = (rng.random((64, 5, 7, 3)) * 255).astype(np.float32)      # sizes not 4k


def _train(layer, images=IMAGES, backend="numpy", runs=1, training=True):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None,) + images.shape[1:], name="x")
        y = layer(x, training=training)
    sess = ff.Session(g, backend=backend)
    out = [sess.run(y, {x: images}) for _ in range(runs)]
    return out if runs > 1 else out[0]


@pytest.mark.parametrize("mode, axes", [("horizontal", (2,)), ("vertical", (1,)),
                                        ("horizontal_and_vertical", (1, 2))])
def test_random_flip_flips_each_image_or_leaves_it(mode, axes):
    out = _train(L.RandomFlip(mode, seed=4))
    flipped = np.array([np.array_equal(o, np.flip(i, [a - 1 for a in axes]))
                        for o, i in zip(out, IMAGES)])
    kept = np.array([np.array_equal(o, i) for o, i in zip(out, IMAGES)])
    assert (flipped ^ kept).all()
    assert 16 <= flipped.sum() <= 48          # p = 1/2 per image (64 images)


def test_rotation_and_zoom_and_translation_by_zero_are_the_input():
    for layer in (L.RandomRotation(0.0), L.RandomZoom((0.0, 0.0)),
                  L.RandomTranslation(0.0, 0.0, interpolation="nearest")):
        np.testing.assert_allclose(_train(layer), IMAGES, rtol=1e-6)


def test_rotation_by_a_half_turn_turns_the_image_over():
    """factor (0.5, 0.5): 180 degrees about the centre, every sample on a pixel."""
    out = _train(L.RandomRotation((0.5, 0.5)))
    np.testing.assert_allclose(out, IMAGES[:, ::-1, ::-1], atol=1e-3)


def test_translation_shifts_and_fills_by_fill_mode():
    """A shift of whole pixels (height 0.4 * 5 = 2 rows down; width -1/7: 1 column
    left), each fill mode's border as Keras defines it."""
    img = IMAGES[:2]
    shift = dict(height_factor=(0.4, 0.4), width_factor=(-1 / 7, -1 / 7))
    want = np.full_like(img, -1.0)
    want[:, 2:, :-1] = img[:, :-2, 1:]
    out = _train(L.RandomTranslation(**shift, fill_mode="constant", fill_value=-1.0), img)
    np.testing.assert_allclose(out, want, atol=1e-3)
    rows, cols = np.array([1, 0, 0, 1, 2]), np.array([1, 2, 3, 4, 5, 6, 6])   # reflect
    np.testing.assert_allclose(_train(L.RandomTranslation(**shift), img),
                               img[:, rows][:, :, cols], atol=1e-3)
    rows, cols = np.array([3, 4, 0, 1, 2]), np.array([1, 2, 3, 4, 5, 6, 0])   # wrap
    np.testing.assert_allclose(_train(L.RandomTranslation(**shift, fill_mode="wrap"), img),
                               img[:, rows][:, :, cols], atol=1e-3)


def test_brightness_draws_one_delta_per_image_within_the_factor():
    flat = np.full((256, 3, 5, 2), 0.5, np.float32)
    out = _train(L.RandomBrightness((-0.2, 0.3), value_range=(0, 1), seed=2), flat)
    delta = out - flat
    per_image = delta[:, :1, :1, :1]
    assert (delta == per_image).all()
    assert per_image.min() >= -0.2 and per_image.max() < 0.3
    assert per_image.min() < -0.18 and per_image.max() > 0.28       # spread over it
    assert abs(float(per_image.mean()) - 0.05) < 0.03
    assert len(np.unique(per_image)) > 250


def test_contrast_scales_about_the_mean_within_keras_range_and_clips():
    """A pair is sorted, as Keras sorts it: (0.5, 0.25) draws from [1 - 0.25, 1 + 0.5]."""
    out = _train(L.RandomContrast((0.5, 0.25), seed=3))
    mean = IMAGES.mean(axis=(1, 2), keepdims=True)
    inner = (np.abs(out - 0.0) > 1e-3) & (np.abs(out - 255.0) > 1e-3)
    ratio = np.where(inner, (out - mean) / (IMAGES - mean), np.nan)
    factors = np.nanmedian(ratio.reshape(64, -1), axis=1)
    assert factors.min() >= 0.75 - 1e-3 and factors.max() <= 1.5 + 1e-3
    assert factors.min() < 0.85 and factors.max() > 1.4
    assert out.min() >= 0.0 and out.max() <= 255.0


def test_invert_grayscale_and_solarization_apply_whole_images():
    inverted = _train(L.RandomInvert(0.5, seed=1))
    done = np.array([np.allclose(o, 255 - i) for o, i in zip(inverted, IMAGES)])
    kept = np.array([np.array_equal(o, i) for o, i in zip(inverted, IMAGES)])
    assert (done ^ kept).all() and 0 < done.sum() < 32     # p drawn in [0, 0.5]
    grey = _train(L.RandomGrayscale(0.5, seed=1))
    weights = np.array([0.2989, 0.587, 0.114], np.float32)
    made = np.array([np.allclose(o, (i @ weights)[..., None], rtol=1e-5)
                     for o, i in zip(grey, IMAGES)])
    assert 16 <= made.sum() <= 48
    # no addition; a threshold per image in [1, 255) (Keras scales the upper end only):
    # values under it kept, the others v -> 255 - v
    solar = _train(L.Solarization(threshold_factor=(1.0, 1.0), seed=2))
    kept = np.isclose(solar, IMAGES, atol=1e-3)
    assert (kept | np.isclose(solar, 255 - IMAGES, atol=1e-3)).all()
    for image, keep in zip(IMAGES, kept):
        assert image[keep].max(initial=0) < image[~keep].min(initial=255)


def test_random_crop_takes_one_window_of_the_batch():
    out = _train(L.RandomCrop(3, 4, seed=5))
    assert out.shape == (64, 3, 4, 3)
    hits = [(t, left) for t in range(3) for left in range(4)
            if np.array_equal(out, IMAGES[:, t:t + 3, left:left + 4])]
    assert len(hits) == 1


def test_seeds_reproduce_across_sessions_and_backends_and_runs_differ(gl):
    layer = L.RandomRotation(0.3, seed=9)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 5, 7, 3), name="x")
        y = L.RandomFlip(seed=9)(layer(x, training=True), training=True)
    got, ref = run_both(g, y, {x: IMAGES})
    assert_matches(got, ref, rtol=1e-4, atol=1e-2)
    again = ff.Session(g, backend="numpy").run(y, {x: IMAGES})
    np.testing.assert_array_equal(again, ref)
    first, second = _train(L.RandomRotation(0.3, seed=9), runs=2)
    assert not np.allclose(first, second)                  # each run draws afresh
    other = _train(L.RandomRotation(0.3, seed=10))
    assert not np.allclose(other, first)


def test_batches_of_any_size_single_images_and_channels_first():
    layer = L.RandomZoom(0.2, seed=1)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 5, 7, 3), name="x")
        y = layer(x, training=True)
        one = ff.placeholder((5, 7, 3), name="one")
        z = L.RandomZoom(0.2, seed=1)(one, training=True)
        first = ff.placeholder((None, 3, 5, 7), name="first")
        w = L.RandomFlip("vertical", data_format="channels_first")(first, training=True)
    sess = ff.Session(g, backend="numpy")
    assert sess.run(y, {x: IMAGES[:5]}).shape == (5, 5, 7, 3)
    assert sess.run(y, {x: IMAGES[:1]}).shape == (1, 5, 7, 3)
    assert sess.run(z, {one: IMAGES[0]}).shape == (5, 7, 3)
    chw = IMAGES[:8].transpose(0, 3, 1, 2)
    out = sess.run(w, {first: chw})
    assert all(np.array_equal(o, i) or np.array_equal(o, i[:, ::-1]) for o, i in zip(out, chw))


@pytest.mark.parametrize("layer", [
    L.RandomFlip(), L.RandomRotation(0.2), L.RandomZoom(0.2), L.RandomTranslation(0.1, 0.1),
    L.RandomCrop(3, 4), L.RandomContrast(0.3), L.RandomBrightness(0.2),
    L.RandomGrayscale(), L.RandomInvert(), L.Solarization(0.3, 0.3)],
    ids=lambda layer: type(layer).__name__)
def test_at_inference_each_random_layer_is_its_input(layer):
    images = IMAGES[:3].copy()
    images[0, 0, 0] = [np.nan, np.inf, -np.inf]
    np.testing.assert_array_equal(_train(layer, images, training=False), images)


def test_auto_contrast_stretches_each_channel_and_keeps_flat_ones():
    images = IMAGES[:2].copy()
    images[1, :, :, 2] = 17.0
    out = _train(L.AutoContrast(), images, training=False)
    lo, hi = images.min(axis=(1, 2), keepdims=True), images.max(axis=(1, 2), keepdims=True)
    want = np.where(hi > lo, (images - lo) * (255.0 / np.where(hi > lo, hi - lo, 1)), images)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("make, match", [
    (lambda: L.RandomRotation(1.5), r"RandomRotation 'random_rotation': factor .*1\.5"),
    (lambda: L.RandomRotation(0.1, fill_mode="mirror"), r"fill_mode 'mirror' is not"),
    (lambda: L.RandomZoom(0.1, interpolation="bicubic"), r"RandomZoom.*'bicubic'"),
    (lambda: L.RandomZoom(-1.0), r"height_factor .*-1\.0"),
    (lambda: L.RandomTranslation(0.1, [0.1, 0.2, 0.3]), r"width_factor .*0\.3"),
    (lambda: L.RandomFlip("diagonal"), r"RandomFlip 'random_flip': mode 'diagonal'"),
    (lambda: L.RandomContrast(-0.1), r"RandomContrast .*factor .*-0\.1"),
    (lambda: L.RandomBrightness(0.1, value_range=3), r"value_range .*3"),
    (lambda: L.RandomGrayscale(2), r"RandomGrayscale .*factor .*2"),
    (lambda: L.RandomCrop(0, 3), r"RandomCrop .*height .*0"),
    (lambda: L.AutoContrast(data_format="channels_first"), r"channels_first"),
])
def test_bad_arguments_are_refused_naming_layer_and_value(make, match):
    with pytest.raises(ff.FragflowError, match=match):
        make()


def test_bad_inputs_are_refused_naming_the_layer():
    g = ff.Graph()
    with g.as_default():
        with pytest.raises(ff.ShapeError, match=r"RandomGrayscale .*\(3 channels\)"):
            L.RandomGrayscale()(ff.placeholder((None, 4, 4, 4)))
        with pytest.raises(ff.ShapeError, match=r"RandomFlip .*H, W, C images"):
            L.RandomFlip()(ff.placeholder((None, 4)))
        with pytest.raises(ff.ShapeError, match=r"RandomRotation .*known height"):
            L.RandomRotation(0.1)(ff.placeholder((None, None, 4, 3)), training=True)


def test_keras2_configs_load():
    """tf.keras 2's configs of these layers (dtype a string, factors as given) make the
    layers, which are their input at inference (Keras 3.15 reads RandomContrast's
    factor as its own: docs/KERAS.md)."""
    base = {"trainable": True, "dtype": "float32"}
    affine = {"fill_mode": "reflect", "fill_value": 0.0, "interpolation": "bilinear",
              "seed": None}
    configs = [
        ("RandomFlip", {"name": "random_flip", "mode": "horizontal", "seed": None}),
        ("RandomRotation", {"name": "random_rotation", "factor": 0.1, **affine}),
        ("RandomZoom", {"name": "random_zoom", "height_factor": 0.1, "width_factor": None,
                        **affine}),
        ("RandomTranslation", {"name": "random_translation", "height_factor": 0.1,
                               "width_factor": [-0.2, 0.3], **affine}),
        ("RandomContrast", {"name": "random_contrast", "factor": 0.2, "seed": None}),
        ("RandomCrop", {"name": "random_crop", "height": 3, "width": 4, "seed": None}),
        ("RandomBrightness", {"name": "random_brightness", "factor": 0.2,
                              "value_range": [0, 255], "seed": None}),
    ]
    layers = [layer_from_config({"class_name": cls, "config": {**base, **config}})
              for cls, config in configs]
    assert [type(layer).__name__ for layer in layers] == [cls for cls, _ in configs]
    assert layers[1].factor == (-0.1, 0.1) and layers[3].get_config()["width_factor"] == \
        [-0.2, 0.3]
    for layer in layers:
        np.testing.assert_array_equal(_train(layer, IMAGES[:2], training=False), IMAGES[:2])


def test_base_layers_take_pairs_as_keras_checks_them():
    """Keras's base layer refuses a pair only where it misses the bounds altogether:
    RandomContrast((0.2, 1.5)) draws from [0.8, 2.5]; (1.5, 2.0) is refused."""
    assert L.RandomContrast((0.2, 1.5)).factor == (0.2, 1.5)
    assert L.RandomRotation((-2.0, 0.5)).factor == (-2.0, 0.5)
    with pytest.raises(ff.AttrError, match=r"RandomContrast .*\(1\.5, 2\.0\)"):
        L.RandomContrast((1.5, 2.0))
    with pytest.raises(ff.AttrError, match=r"RandomZoom .*\[-0\.5, 1\.5\]"):
        L.RandomZoom([-0.5, 1.5])                        # its own check: each value


def test_colour_and_flip_layers_train_on_images_of_any_size():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, None, None, 3), name="x")
        y = L.RandomFlip(seed=1)(L.RandomBrightness(0.1)(L.RandomContrast(0.2)(
            x, training=True), training=True), training=True)
    sess = ff.Session(g, backend="numpy")
    for images in (IMAGES[:2], IMAGES[:3, :4, :6]):
        assert sess.run(y, {x: images}).shape == images.shape
