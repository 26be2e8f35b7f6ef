"""sanitize.check_shader's whole-text fast path refuses exactly what its line-by-line
rules refuse (a user_lines range past the end forces the line-by-line rules)."""
import random

import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.sanitize import UnsafeShaderError, check_shader

NOWHERE = range(10 ** 9, 10 ** 9 + 1)      # user lines that are no line: the slow path
INJECTIONS = ["\n#define exp(x) 42.0\n", "\n  \t# if 0\n", "#", "\r", "\x00", "\x0b",
              "\u00e9", "\u2028", "// note \\", "// a */ b", "//", "*/", "\\", "\t",
              "\n", " // ok", "\n//#x\n", "\x7f"]


def _verdict(source, user_lines):
    try:
        check_shader(source, user_lines)
        return None
    except UnsafeShaderError as err:
        return str(err)


@pytest.fixture(scope="module")
def sources():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5, 6), "float32", name="x")
        y = ff.reduce_sum(ff.relu(x @ ff.constant(np.ones((6, 3), np.float32))), axis=0)
    with ff.Session(g) as sess:
        return [k.source for k in sess.compile([y], feeds=[x]).kernels]


def test_fast_and_line_by_line_agree(sources):
    rng = random.Random(0)
    cases = list(sources)
    for _ in range(400):
        source = rng.choice(sources)
        for _ in range(rng.randint(1, 2)):
            at = rng.randrange(len(source) + 1)
            source = source[:at] + rng.choice(INJECTIONS) + source[at:]
        cases.append(source)
    cases += ["  #version 330 core\n", "#versionx\n", "#version 330 core\n// \\\n", ""]
    refused = 0
    for source in cases:
        fast, slow = _verdict(source, range(0)), _verdict(source, NOWHERE)
        assert (fast is None) == (slow is None), source
        assert fast == slow
        refused += fast is not None
    assert 0 < refused < len(cases)        # both kinds were tried
