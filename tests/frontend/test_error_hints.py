"""Errors that help a TensorFlow user (issue 26): a misspelt keyword is caught at the
function the user called, "did you mean" only for names close in spelling (and, for
TensorFlow names fragflow knows it lacks, what to use instead), and a fetch from another
graph of the same name says so."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as tf


@pytest.fixture
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


def test_misspelt_keyword_names_the_public_function_and_the_right_keyword(g):
    x = tf.constant([[1.0, 2.0]])
    with pytest.raises(TypeError, match=r"^reduce_mean\(\) got an unexpected keyword "
                                        r"'axsi'; did you mean 'axis'\?") as err:
        tf.reduce_mean(x, axsi=0)
    assert isinstance(err.value, tf.FragflowError)
    assert "test_error_hints.py" in str(err.value)              # the user's line
    with pytest.raises(tf.FragflowError, match=r"conv2d\(\).*'stride'.*'strides'"):
        tf.nn.conv2d(tf.zeros([1, 4, 4, 1]), tf.zeros([2, 2, 1, 1]), stride=1,
                     padding="SAME")
    with pytest.raises(tf.FragflowError, match=r"softmax\(\).*'axiss'.*'axis'"):
        tf.nn.softmax(x, axiss=-1)


def test_a_keyword_far_from_any_lists_the_ones_taken(g):
    with pytest.raises(tf.FragflowError, match=r"reduce_sum\(\) got an unexpected keyword "
                                               r"'banana'; it takes x, axis, keepdims"):
        tf.reduce_sum(tf.constant([1.0]), banana=1)


def test_good_keywords_still_work(g):
    y = tf.reduce_mean(tf.constant([[1.0, 3.0]]), axis=1, keepdims=True, name="m")
    assert y.name == "m" and y.shape == (1, 1)
    np.testing.assert_array_equal(tf.Session(g, backend="numpy").run(y), [[2.0]])


@pytest.mark.parametrize("name, not_suggested, says", [
    ("data", "atan", "feed_dict"),
    ("signal", "sign", "FFT"),
    ("gfile", "", "open()"),                 # tf.case exists (issue 25)
    ("strings", "string", "string tensors"),
    ("estimator", "", "Session"),
])
def test_known_missing_names_say_what_to_use_not_a_lookalike(name, not_suggested, says):
    with pytest.raises(AttributeError) as err:
        getattr(tf, name)
    text = str(err.value)
    assert says in text and "docs/TENSORFLOW.md" in text
    if not_suggested:
        assert f"fragflow.{not_suggested}" not in text and "did you mean" not in text


def test_close_misspellings_still_get_suggestions():
    with pytest.raises(AttributeError, match=r"did you mean fragflow\.reduce_mean( |\?)"):
        tf.reduce_meen
    with pytest.raises(AttributeError, match=r"did you mean fragflow\.nn\.softmax\?"):
        tf.nn.softmx


def test_unrelated_short_names_get_no_suggestion():
    with pytest.raises(AttributeError) as err:
        tf.sgnal
    assert "did you mean" not in str(err.value) or "fragflow.sign" not in str(err.value)


def test_fetch_from_another_graph_of_the_same_name_says_so():
    tf.reset_default_graph()
    old = tf.constant(1.0) * 2.0
    tf.reset_default_graph()
    new = tf.constant(1.0) * 3.0
    sess = tf.Session(backend="numpy")
    assert float(sess.run(new)) == 3.0
    with pytest.raises(tf.FetchError, match="another graph of the same name.*"
                                            "reset_default_graph"):
        sess.run(old)
    with sess.as_default():
        with pytest.raises(tf.FragflowError, match="another graph of the same name"):
            old.eval()


def test_fetch_from_a_graph_of_another_name_does_not_claim_the_same_name():
    a, b = tf.Graph("a"), tf.Graph("b")
    with a.as_default():
        x = tf.constant(1.0)
    with pytest.raises(tf.FetchError) as err:
        tf.Session(b, backend="numpy").run(x)
    assert "same name" not in str(err.value)


def test_misspelt_layer_keyword_suggests_the_right_one():
    with pytest.raises(TypeError, match=r"layers\.Conv2D\(\) got an unexpected keyword "
                                        r"'activaton'; did you mean 'activation'\?") as err:
        tf.keras.layers.Conv2D(8, 3, activaton="relu")
    assert isinstance(err.value, tf.FragflowError)
    with pytest.raises(tf.FragflowError, match=r"'input_shap'.*'input_shape'"):
        tf.keras.layers.Dense(4, input_shap=(3,))
