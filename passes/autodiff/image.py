"""Gradient rules of the image op family. A resize is linear in its images, so its
gradient is the adjoint resize (TF's ResizeBilinearGrad / ResizeNearestNeighborGrad);
those are linear in dy, and their adjoint is the forward resize again: second order
(and any order) works."""
from __future__ import annotations

from ...ir.ops.image import resize, resize_grad
from .registry import gradient

_GRAD_OF = {"resize_bilinear": "resize_bilinear_grad",
            "resize_nearest_neighbor": "resize_nearest_neighbor_grad"}
_FORWARD_OF = {grad: forward for forward, grad in _GRAD_OF.items()}


def _flags(node):
    return {"align_corners": node.attrs["align_corners"],
            "half_pixel_centers": node.attrs["half_pixel_centers"]}


@gradient(*_GRAD_OF)
def _resize(node, dy):
    (images,) = node.inputs
    if images.dtype != "float32":
        return [None]          # int32 images take no gradient
    return [resize_grad(_GRAD_OF[node.op], dy, images, **_flags(node))]


@gradient(*_FORWARD_OF)
def _resize_grad(node, ddx):
    dy, _ = node.inputs        # the images give the shape only
    size = dy.shape[1:3]
    return [resize(_FORWARD_OF[node.op], ddx, size, **_flags(node)), None]
