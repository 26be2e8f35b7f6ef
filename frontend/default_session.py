"""TensorFlow 1's default session: `with ff.Session() as sess:` or `sess.as_default()`
makes sess the one that `tensor.eval(feed_dict=...)` and `op.run()` use.

The stack is per thread, as in TensorFlow (a session entered on one thread is not the
default on another).

>>> import fragflow as ff, numpy as np
>>> g = ff.Graph()
>>> with g.as_default():
...     x = ff.placeholder((2,), "float32")
...     y = x * 2.0
>>> with ff.Session(g, backend="numpy") as sess:
...     y.eval(feed_dict={x: np.float32([1, 2])}).tolist()
[2.0, 4.0]
"""
from __future__ import annotations

import contextlib
import threading
import weakref

from ..ir.errors import FragflowError

__all__ = ["get_default_session"]


class _Stack(threading.local):
    def __init__(self):
        self.sessions: list = []


_STACK = _Stack()


def push(session) -> None:
    _STACK.sessions.append(session)


def pop(session) -> None:
    """Remove session's innermost entry (an exit out of order removes the right one)."""
    sessions = _STACK.sessions
    for i in range(len(sessions) - 1, -1, -1):
        if sessions[i] is session:
            del sessions[i]
            return


@contextlib.contextmanager
def as_default(session):
    """The body's default session is session (it is not closed at the end)."""
    push(session)
    try:
        yield session
    finally:
        pop(session)


def get_default_session():
    """The innermost session entered with `with ff.Session() as s` or s.as_default()
    on this thread, or None."""
    return _STACK.sessions[-1] if _STACK.sessions else None


def session_for(tensor, session=None):
    """The session that runs tensor.eval(): the one given, else the default session;
    either must run the tensor's graph."""
    session = session if session is not None else get_default_session()
    if session is None:
        raise FragflowError(
            f"cannot evaluate {tensor!r}: no default session. Use `with ff.Session() as "
            f"sess:` or `with sess.as_default():` around the call, pass session=sess, "
            f"or call sess.run(tensor)")
    if session.graph is not tensor.graph:
        raise FragflowError(
            f"cannot evaluate {tensor!r} of graph '{tensor.graph.name}' in the default "
            f"session, which runs graph '{session.graph.name}'"
            + (" (another graph of the same name)" if session.graph.name ==
               tensor.graph.name else "")
            + ": pass session= or make a session of that graph the default")
    return session


_EAGER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def eager_value(tensor):
    """tensor.numpy(): run in the default session if it runs the tensor's graph, else in
    a numpy-executor session of that graph kept for these calls."""
    session = get_default_session()
    if session is None or session.graph is not tensor.graph:
        session = _EAGER.get(tensor.graph)
        if session is None:
            from .session import Session  # session -> tensor -> this module
            session = _EAGER[tensor.graph] = Session(tensor.graph, backend="numpy")
    return session.run(tensor)


def InteractiveSession(graph=None, backend="gl", **kwargs):  # noqa: N802 (TF1's name)
    """A Session that makes itself the default session until the process ends (or
    another is entered), as TF1's tf.InteractiveSession: tensor.eval() and op.run()
    work without a `with` block. Close it with sess.close()."""
    from .session import Session  # session -> tensor -> this module
    session = Session(graph, backend=backend, **kwargs)
    push(session)
    return session


__all__.append("InteractiveSession")
