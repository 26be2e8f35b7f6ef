"""The AttributeError a missing TensorFlow name raises: module __getattr__ that suggests
fragflow's spelling (a table of known renames, then close matches)."""
from __future__ import annotations

import difflib

# TensorFlow names fragflow spells differently or handles another way.
HINTS = {
    "get_variable": "ff.Variable(initial_value, name=...) (initial values from "
                    "ff.initializers or ops such as ff.random_normal)",
    "Print": "sess.run the tensor, or Session(debug=True)",
    "print": "sess.run the tensor, or Session(debug=True)",
    "control_dependencies": "ff.optim.group(...) / ff.optim.with_dependencies(...) "
                            "(fragflow graphs have data edges only)",
    "group": "ff.optim.group",
    "ConfigProto": "nothing: ff.Session takes backend= (\"gl\" or \"numpy\") and "
                   "debug=",
    "variable_scope": "ff.name_scope (variables are shared by passing them, or by "
                      "calling one ff.layers layer again)",
    "set_random_seed": "ff.random.set_seed (random ops take seed=; None means 0)",
    "GraphKeys": "nothing: fragflow has no collections (ff.trainable_variables(), "
                 "a layer's .updates)",
    "get_collection": "ff.global_variables() / ff.trainable_variables()",
    "assign": "var.assign(value)",
    "cond": "ff.where (both branches are computed)",
    "while_loop": "a Python loop that builds the ops, or ff.gpgpu_program",
    "py_func": "nothing: graphs run on the GPU only",
    "contrib": "nothing: tf.contrib has no counterpart",
    "Saver": "sess.save(path) / sess.restore(path) (.npz, variables only)",
    "summary": "nothing: log the values sess.run returns",
    "app": "nothing: a plain `if __name__ == \"__main__\":`",
    "flags": "argparse",
    "to_float": "ff.cast(x, ff.float32)",
    "to_int32": "ff.cast(x, ff.int32)",
    "float64": "ff.float32 (fragflow has float32, int32 and bool)",
    "int64": "ff.int32 (fragflow has float32, int32 and bool)",
    "float16": "ff.float32 (fragflow has float32, int32 and bool)",
    "random_shuffle": "a numpy permutation of the feed",
    "shape": "x.shape (static; None where fed)",
    "size": "math.prod(x.shape)",
    "rank": "x.ndim",
    "count_nonzero": "ff.reduce_sum(ff.cast(ff.not_equal(x, 0), ff.int32))",
    "reduce_euclidean_norm": "ff.norm(x, axis=...)",
    "matrix_diag": "ff.linalg.diag",
    "matrix_diag_part": "ff.linalg.diag_part",
    "matrix_band_part": "ff.linalg.band_part",
    "concat_v2": "ff.concat",
}


def missing(module_name: str, name: str, names) -> AttributeError:
    """The AttributeError for module_name.name, with a hint where one is known."""
    hint = HINTS.get(name)
    if hint is None:
        close = difflib.get_close_matches(name, list(names), n=3, cutoff=0.75)
        if close:
            hint = " or ".join(f"{module_name}.{c}" for c in close)
    text = f"module '{module_name}' has no attribute '{name}'"
    if hint:
        text += f"; fragflow's spelling: {hint}"
    text += " (see docs/TENSORFLOW.md)"
    return AttributeError(text)


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
