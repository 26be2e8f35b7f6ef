"""Keras 3 (torch backend) as the oracle of the augmentation layer tests, run in a
subprocess (as keras_models.py).

    python keras_augment_models.py make OUT      OUT/tutorial.keras and .h5 (the image
                                                 classification tutorial's model:
                                                 augmentation, Rescaling, a small
                                                 convnet), OUT/tutorial.inputs.npz,
                                                 OUT/tutorial.keras.npz (Keras's
                                                 predictions), OUT/layers.json (each
                                                 layer's Keras config) and
                                                 OUT/layers.npz (each layer's training
                                                 output where its draw is fixed, and
                                                 inference outputs)
    python keras_augment_models.py predict F...  Keras's load_model of each file F and
                                                 its predictions: F.pred.npz
"""
import json
import os
import sys

os.environ["KERAS_BACKEND"] = "torch"

import keras  # noqa: E402
import numpy as np  # noqa: E402

layers = keras.layers

# name: (class, keyword arguments, training): layers whose training draw is fixed
# (a factor pair of one value, a probability of 1), or that are not random
CASES = {
    **{f"rotation_{fill}_{interp}": ("RandomRotation",
                                      dict(factor=(0.1, 0.1), fill_mode=fill,
                                           interpolation=interp, fill_value=-3.0), True)
       for fill in ("reflect", "wrap", "constant", "nearest")
       for interp in ("bilinear", "nearest")},
    "rotation_half_turn": ("RandomRotation", dict(factor=(-0.5, -0.5)), True),
    "zoom_in": ("RandomZoom", dict(height_factor=(-0.3, -0.3), fill_mode="wrap"), True),
    "zoom_out": ("RandomZoom", dict(height_factor=(0.4, 0.4), width_factor=(0.2, 0.2),
                                    fill_mode="constant"), True),
    "translation": ("RandomTranslation", dict(height_factor=(0.3, 0.3),
                                              width_factor=(-0.45, -0.45)), True),
    "translation_far": ("RandomTranslation", dict(height_factor=(-0.9, -0.9),
                                                  width_factor=(1.0, 1.0),
                                                  interpolation="nearest"), True),
    "brightness": ("RandomBrightness", dict(factor=(0.2, 0.2)), True),
    "brightness_unit": ("RandomBrightness", dict(factor=(-0.3, -0.3),
                                                 value_range=(1, 0)), True),
    "grayscale": ("RandomGrayscale", dict(factor=1.0), True),
    "invert": ("RandomInvert", dict(factor=(1.0, 1.0), value_range=(0, 300)), True),
    "solarization": ("Solarization", dict(value_range=(0, 1)), True),
    "crop_resized": ("RandomCrop", dict(height=9, width=4), True),
    # at inference: Keras 3's random layers are their input (RandomCrop too)
    **{f"{cls}_inference": (cls, kwargs, False) for cls, kwargs in [
        ("RandomFlip", dict()), ("RandomRotation", dict(factor=0.3)),
        ("RandomZoom", dict(height_factor=0.2)),
        ("RandomTranslation", dict(height_factor=0.2, width_factor=0.1)),
        ("RandomCrop", dict(height=3, width=4)), ("RandomContrast", dict(factor=0.5)),
        ("RandomBrightness", dict(factor=0.5)), ("RandomGrayscale", dict(factor=1.0)),
        ("RandomInvert", dict()), ("Solarization", dict(addition_factor=0.5))]},
    "auto_contrast": ("AutoContrast", dict(), False),
    "auto_contrast_unit": ("AutoContrast", dict(value_range=(0, 1)), False),
}
# layers only configured (their draws are not fixed): their configs as Keras writes them
CONFIGS = {
    "flip": ("RandomFlip", dict(mode="horizontal", seed=3)),
    "contrast": ("RandomContrast", dict(factor=0.2)),
    "contrast_pair": ("RandomContrast", dict(factor=(0.1, 0.4), seed=5)),
    "zoom": ("RandomZoom", dict(height_factor=0.1)),
    "rotation": ("RandomRotation", dict(factor=0.1)),
    "crop": ("RandomCrop", dict(height=3, width=4, seed=9)),
    "solarization_factors": ("Solarization", dict(addition_factor=0.2,
                                                  threshold_factor=(0.1, 0.5))),
}


def images():
    """Images of 8 x 6 with values in [0, 255], a constant channel in the second."""
    x = np.random.default_rng(11).random((2, 8, 6, 3), np.float32) * 255.0
    x[1, :, :, 2] = 40.0
    return x


def tutorial():
    """The image classification tutorial's model: augmentation in a Sequential of its
    own, Rescaling, a small convnet."""
    augmentation = keras.Sequential([
        layers.RandomFlip("horizontal"),
        layers.RandomRotation(0.1),
        layers.RandomZoom(0.1),
        layers.RandomTranslation(0.1, 0.1),
        layers.RandomContrast(0.2),
        layers.RandomBrightness(0.1),
    ], name="data_augmentation")
    model = keras.Sequential([
        keras.Input((12, 12, 3)),
        augmentation,
        layers.Rescaling(1.0 / 255),
        layers.Conv2D(4, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(6, 3, padding="same", activation="relu"),
        layers.GlobalAveragePooling2D(),
        layers.Dropout(0.2),
        layers.Dense(3),
    ], name="tutorial")
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    x = np.random.default_rng(12).random((4, 12, 12, 3), np.float32) * 255.0
    return model, x


def make(out):
    keras.utils.set_random_seed(0)
    model, x = tutorial()
    model.save(os.path.join(out, "tutorial.keras"))
    try:        # Keras 3.15 cannot: its augmentation layers hold a module (deepcopy)
        model.save(os.path.join(out, "tutorial.h5"))
    except TypeError:
        os.remove(os.path.join(out, "tutorial.h5"))
    np.savez(os.path.join(out, "tutorial.inputs.npz"), x0=x)
    np.savez(os.path.join(out, "tutorial.keras.npz"), y0=model.predict(x, verbose=0))
    x = images()
    results, configs = {"images": x}, {}
    for name, (cls, kwargs, training) in CASES.items():
        layer = getattr(layers, cls)(**kwargs)
        results[name] = np.asarray(layer(x, training=training))
        configs[name] = [cls, kwargs, layer.get_config(), training]
    for name, (cls, kwargs) in CONFIGS.items():
        configs[name] = [cls, kwargs, getattr(layers, cls)(**kwargs).get_config(), None]
    np.savez(os.path.join(out, "layers.npz"), **results)
    with open(os.path.join(out, "layers.json"), "w") as f:
        json.dump(configs, f)


def predict(paths):
    for path in paths:
        model = keras.models.load_model(path)
        x = np.load(os.path.join(os.path.dirname(path), "tutorial.inputs.npz"))["x0"]
        np.savez(path + ".pred.npz", y0=model.predict(x, verbose=0))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        predict(sys.argv[2:])
