"""ir/ops/image.py's checks, written for the mutants that `make mutation` found alive
(tests/mutation/run.py): an image with an empty spatial side is refused, a 1-pixel
side is not (nearest-neighbour resize of one pixel repeats it), and a size that is
not whole numbers is refused rather than truncated."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import reference_session


def test_an_image_with_an_empty_side_is_refused():
    g = ff.Graph()
    with g.as_default():
        with pytest.raises(ff.ShapeError, match="empty spatial dimension"):
            ff.image.resize_nearest_neighbor(ff.placeholder((1, 0, 3, 2), name="x"), (2, 2))


def test_a_one_pixel_image_resizes_to_copies_of_its_pixel():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 1, 1, 2), name="x")
        y = ff.image.resize_nearest_neighbor(x, (2, 3))
    with reference_session(g) as sess:
        out = sess.run(y, {x: np.array([[[[1.5, -2.0]]]], np.float32)})
    np.testing.assert_array_equal(out, np.broadcast_to([1.5, -2.0], (1, 2, 3, 2)))


def test_a_size_of_fractions_is_refused():
    g = ff.Graph()
    with g.as_default():
        with pytest.raises(ff.FragflowError):
            ff.image.resize_bilinear(ff.placeholder((1, 4, 4, 1), name="x"), (2.5, 3))
