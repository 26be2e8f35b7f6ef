"""The AttributeError a missing TensorFlow name raises: module __getattr__ that suggests
fragflow's spelling (a table of known renames, then close matches)."""
from __future__ import annotations

import difflib

# TensorFlow names fragflow spells differently or handles another way, and the ones it
# knows it lacks, each with what to use instead (docs/TENSORFLOW.md lists them all). A
# name here never gets a "close match": tf.data is not fragflow.atan.
HINTS = {
    "TensorArray": "a Python list of tensors, then ff.stack (or ff.scan's stacked ys)",
    "py_func": "nothing: graphs run on the GPU only",
    "py_function": "nothing: graphs run on the GPU only",
    "numpy_function": "nothing: graphs run on the GPU only",
    "contrib": "nothing: tf.contrib has no counterpart",
    "data": "nothing: feed numpy batches with feed_dict= (no tf.data pipelines)",
    "signal": "nothing: no FFT or STFT ops; compute spectra with numpy and feed them",
    "strings": "nothing: fragflow has no string tensors",
    "string": "nothing: fragflow has no string tensors",
    "sparse": "nothing: dense tensors only",
    "SparseTensor": "nothing: dense tensors only",
    "distribute": "fragflow.distributed (Ray: batch inference and data-parallel training, "
                  "docs/SCALING.md)",
    "estimator": "a Session loop, or ff.keras.Sequential's fit",
    "function": "nothing needed: fragflow always builds a graph; call the function",
    "GradientTape": "ff.gradients(loss, variables) (graphs, no tape)",
    "saved_model": "sess.save / tf.train.Saver (variables), ff.onnx.export (the model)",
    "lite": "ff.webgl.export (docs/WEBGL.md) or ff.onnx.export",
    "io": "open() and numpy for files",
    "gfile": "os, glob and open()",
    "app": "nothing: a plain `if __name__ == \"__main__\":`",
    "flags": "argparse",
    "to_float": "ff.cast(x, ff.float32)",
    "to_int32": "ff.cast(x, ff.int32)",
    "float64": "ff.float32 (fragflow has float32, int32 and bool)",
    "int64": "ff.int32 (fragflow has float32, int32 and bool)",
    "float16": "ff.float32 (fragflow has float32, int32 and bool)",
    "string_": "nothing: fragflow has no string tensors",
    "random_shuffle": "a numpy permutation of the feed",
    "boolean_mask": "nothing: its shape depends on the values; use ff.where(mask, x, 0) "
                    "and sums over the mask",
    "sequence_mask": "ff.less(ff.range(maxlen), lengths[:, None])",
    "sparse_to_dense": "ff.scatter_nd(indices, values, shape)",
    "decode_jpeg": "nothing: decode images with PIL or imageio and feed the arrays",
    "decode_png": "nothing: decode images with PIL or imageio and feed the arrays",
    "random_flip_left_right": "augment with numpy before feeding (or ff.image.flip_left_right)",
    "random_crop": "augment with numpy before feeding",
    "ctc_loss": "nothing: no CTC loss",
    "ModelCheckpoint": "model.save_weights(path) in a keras.callbacks.LambdaCallback",
    "reduce_euclidean_norm": "ff.norm(x, axis=...)",
    "matrix_diag": "ff.linalg.diag",
    "matrix_diag_part": "ff.linalg.diag_part",
    "matrix_band_part": "ff.linalg.band_part",
    "concat_v2": "ff.concat",
    "datasets": "nothing: fragflow downloads no data; load it with numpy or "
                "sklearn.datasets (load_digits) and pass arrays",
    "preprocessing": "numpy, before feeding",
    "applications": "ff.onnx.load a pretrained model (docs/ONNX.md)",
    "image_summary": "ff.summary.image is not supported either: log scalars/histograms",
}
DOCS = "docs/TENSORFLOW.md, 'Symbols'"


def missing(module_name: str, name: str, names) -> AttributeError:
    """The AttributeError for module_name.name, with a hint where one is known."""
    hint = HINTS.get(name)
    text = f"module '{module_name}' has no attribute '{name}'"
    if hint is not None and hint.startswith("nothing"):
        text += f"; not supported in fragflow{hint[len('nothing'):]}"
    elif hint is not None:
        text += f"; in fragflow: {hint}"
    else:
        close = close_names(name, names)
        if close:
            text += "; did you mean " + " or ".join(f"{module_name}.{c}" for c in close) + "?"
    text += f" (see {DOCS})"
    return AttributeError(text)


def close_names(name: str, names, n: int = 3) -> list:
    """Names close in spelling: difflib's ratio of 0.8 or more, and a length within a
    quarter of name's (so that 'signal' does not suggest 'sign')."""
    close = difflib.get_close_matches(name, list(names), n=n * 2, cutoff=0.8)
    slack = max(1, len(name) // 4)
    return [c for c in close if abs(len(c) - len(name)) <= slack][:n]


def install(module_globals: dict, public_name: str) -> None:
    """Give a namespace module __getattr__ (with hints) and a __dir__ of its __all__."""
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise missing(public_name, name, module_globals.get("__all__", ()))

    def __dir__():
        return sorted(module_globals.get("__all__", ()))

    module_globals["__getattr__"] = __getattr__
    module_globals["__dir__"] = __dir__
