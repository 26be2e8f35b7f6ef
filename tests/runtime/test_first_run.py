"""A new process's first run: compiled Jinja templates are kept in fragflow's cache
directory (beside Mesa's shader cache) and give the same kernels as compiling them."""
import json
import os
import subprocess
import sys

from fragflow.codegen.environment import use_bytecode_cache

_CHILD = """
import json, numpy as np, fragflow as ff
g = ff.Graph()
with g.as_default():
    x = ff.Variable(np.arange(10, dtype=np.float32).reshape(2, 5), name="x")
    y = ff.softmax(ff.relu(x @ ff.transpose(x)) * 0.1)
    z = ff.reduce_sum(ff.tanh(x) + 1.0, axis=0)
sess = ff.Session(g)
fn = sess.compile([y, z])
out = fn()
print(json.dumps({"sources": [k.source for k in fn.kernels],
                  "values": [o.tolist() for o in out]}))
"""


def _child(cache_dir):
    env = dict(os.environ, FRAGFLOW_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_loads_compiled_templates_and_makes_the_same_kernels(gl, tmp_path):
    first = _child(tmp_path)
    cached = os.listdir(tmp_path / "templates")
    assert cached, "no compiled template was kept"
    second = _child(tmp_path)
    assert second == first


def test_a_cache_directory_others_can_write_is_not_used(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    if hasattr(os, "getuid"):
        assert not use_bytecode_cache(shared)
