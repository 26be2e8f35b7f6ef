"""ff.webgl: a graph exported as a standalone WebGL2 model (docs/WEBGL.md).

    ff.webgl.export(fetches, feeds, "web/", session=sess)

writes web/model.js (one ES module, no imports: the runtime in runtime.js with the
model's schedule), web/model.bin (constants and variables) and web/index.html."""
from .export import Export, HalfWeightsError, UnknownShapeError, WebGLExportError, export

__all__ = ["Export", "HalfWeightsError", "UnknownShapeError", "WebGLExportError", "export"]
