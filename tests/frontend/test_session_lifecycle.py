"""Closed sessions refuse to work, and restore() is all or nothing (issue 12).

Before: save() after close() wrote the initial values without an error; a checkpoint
missing a variable restored silently; a bad entry after good ones left the good ones
written; truncated, corrupt, object-array or non-npz files raised raw BadZipFile,
ValueError or TypeError."""
import os
import zipfile

import numpy as np
import pytest

import fragflow as ff


@pytest.fixture(params=["numpy", "gl"])
def backend(request):
    if request.param == "gl":
        request.getfixturevalue("gl")       # skips where no GL context can be made
    return request.param


def model():
    g = ff.Graph("model")
    with g.as_default():
        x = ff.placeholder((None, 3), name="x")
        a = ff.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="dense/a")
        b = ff.Variable(np.zeros(2, np.float32), name="dense/b")
        steps = ff.Variable(np.zeros((), np.int32), name="steps")
        y = x @ a + b
        bump = steps.assign(steps + 1)
    return g, x, a, b, steps, y, bump


def trained(backend):
    """A session whose variables differ from their initial values."""
    g, x, a, b, steps, y, bump = model()
    sess = ff.Session(g, backend=backend)
    sess.set(a, np.full((3, 2), -1.5, np.float32))
    sess.set(b, np.array([2.0, 3.0], np.float32))
    sess.run(bump)
    return sess, (g, x, a, b, steps, y, bump)


# -- closed sessions ---------------------------------------------------------------------
CALLS = {
    "run": lambda s, t, p: s.run(t[5], {t[1]: np.ones((2, 3), np.float32)}),
    "run_op": lambda s, t, p: s.run(t[6]),
    "compile": lambda s, t, p: s.compile([t[5]], feeds=[t[1]]),
    "get": lambda s, t, p: s.get(t[2]),
    "set": lambda s, t, p: s.set(t[2], np.ones((3, 2), np.float32)),
    "save": lambda s, t, p: s.save(p),
    "restore": lambda s, t, p: s.restore(p),
    "profile": lambda s, t, p: s.profile(t[5], {t[1]: np.ones((2, 3), np.float32)}, runs=1),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_closed_session_refuses(call, backend, tmp_path):
    sess, t = trained(backend)
    saved = tmp_path / "before.npz"
    sess.save(saved)
    target = saved if call == "restore" else tmp_path / "after.npz"
    sess.close()
    with pytest.raises(ff.SessionClosedError, match="session is closed"):
        CALLS[call](sess, t, target)
    assert issubclass(ff.SessionClosedError, ff.FragflowError)
    if call == "save":
        assert not target.exists(), "save() after close() wrote a file"


def test_close_twice_and_memory_after_close(backend):
    sess, _ = trained(backend)
    sess.close()
    sess.close()
    memory = sess.memory()
    assert memory["textures"] == memory["bytes"] == memory["plans"] == 0


def test_a_compiled_function_of_a_closed_session_refuses(gl):
    sess, t = trained("gl")
    fn = sess.compile([t[5]], feeds=[t[1]])
    assert fn(np.ones((2, 3), np.float32))[0].shape == (2, 2)
    sess.close()
    with pytest.raises(ff.SessionClosedError):
        fn(np.ones((2, 3), np.float32))


# -- restore: all or nothing -------------------------------------------------------------
def values(sess, t):
    return [sess.get(v) for v in (t[2], t[3], t[4])]


def assert_unchanged(sess, t, before):
    for got, want in zip(values(sess, t), before):
        np.testing.assert_array_equal(got, want)


def test_restore_round_trip_into_a_fresh_session(backend, tmp_path):
    sess, t = trained(backend)
    sess.save(tmp_path / "ckpt")                      # numpy adds .npz
    want = values(sess, t)
    with ff.Session(t[0], backend=backend) as fresh:
        fresh.restore(tmp_path / "ckpt")
        for got, w in zip(values(fresh, t), want):
            np.testing.assert_array_equal(got, w)
            assert got.dtype == w.dtype


def test_a_missing_variable_is_an_error_unless_not_strict(backend, tmp_path):
    sess, t = trained(backend)
    path = tmp_path / "partial.npz"
    np.savez(path, **{"dense/a": np.full((3, 2), 7.0, np.float32)})
    before = values(sess, t)
    with pytest.raises(ff.SerializationError, match=r"lacks variable\(s\) 'dense/b', 'steps'"
                                                    r".*strict=False"):
        sess.restore(path)
    assert_unchanged(sess, t, before)
    sess.restore(path, strict=False)
    got = values(sess, t)
    np.testing.assert_array_equal(got[0], np.full((3, 2), 7.0, np.float32))
    np.testing.assert_array_equal(got[1], before[1])
    np.testing.assert_array_equal(got[2], before[2])


BAD_ENTRIES = {
    # entries: (error pattern) -- the good 'dense/a' always comes first in the file
    "shape": ({"dense/b": np.zeros(3, np.float32)}, r"'dense/b' has shape \(3,\); the "
                                                      r"variable's is \(2,\)"),
    "dtype": ({"steps": np.array(1.5)}, r"'steps' is stored as float64; the variable is "
                                        r"int32"),
    "unknown": ({"dense/c": np.zeros(2, np.float32)}, r"holds 'dense/c', which is not a "
                                                       r"variable of graph 'model'"),
    "object": ({"dense/b": np.array([{"a": 1}, None], dtype=object)},
               r"'dense/b' is stored as object"),
    "int range": ({"steps": np.array(2 ** 40)}, r"outside int32's range"),
}


@pytest.mark.parametrize("case", sorted(BAD_ENTRIES))
def test_a_bad_entry_writes_nothing(case, backend, tmp_path):
    sess, t = trained(backend)
    entries, message = BAD_ENTRIES[case]
    good = {"dense/a": np.full((3, 2), 9.0, np.float32), "dense/b": np.ones(2, np.float32),
            "steps": np.array(5, np.int32)}
    path = tmp_path / "bad.npz"
    np.savez(path, **{**good, **entries})             # np.savez pickles object arrays
    before = values(sess, t)
    with pytest.raises(ff.SerializationError, match=message):
        sess.restore(path)
    assert_unchanged(sess, t, before)


def _truncated(path, good):
    data = good.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def _corrupt(path, good):
    data = bytearray(good.read_bytes())
    with zipfile.ZipFile(good) as z:                  # flip bytes inside the last entry
        info = z.infolist()[-1]
    middle = info.header_offset + 30 + len(info.filename) + info.compress_size // 2
    data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    path.write_bytes(bytes(data))


BAD_FILES = {
    "truncated": _truncated,
    "corrupt": _corrupt,
    "npy, not npz": lambda path, good: np.save(open(path, "wb"), np.zeros(3)),
    "text": lambda path, good: path.write_text("w = [1, 2, 3]\n"),
    "empty": lambda path, good: path.write_bytes(b""),
    "pickle": lambda path, good: path.write_bytes(b"\x80\x04\x95\x05\x00\x00\x00\x00"
                                                  b"\x00\x00\x00K\x01."),
    "a zip of other files": lambda path, good: zipfile.ZipFile(path, "w").writestr(
        "readme.txt", "hello"),
    "a directory": lambda path, good: os.mkdir(path),
    "missing": lambda path, good: None,
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_an_unreadable_file_raises_serialization_error(case, backend, tmp_path):
    sess, t = trained(backend)
    good = tmp_path / "good.npz"
    sess.save(good)
    path = tmp_path / "bad.npz"
    BAD_FILES[case](path, good)
    before = values(sess, t)
    with pytest.raises(ff.SerializationError, match=str(path).replace(".", r"\.")):
        sess.restore(path)
    assert_unchanged(sess, t, before)


def test_save_into_a_missing_directory_raises_serialization_error(tmp_path):
    sess, _ = trained("numpy")
    with pytest.raises(ff.SerializationError, match="cannot write checkpoint"):
        sess.save(tmp_path / "no" / "such" / "dir" / "ckpt.npz")
