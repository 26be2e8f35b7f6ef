"""A pytest plugin that keeps a seeded sample of the collected tests:
FRAGFLOW_TEST_SAMPLE="SEED/N" keeps about one test in N, chosen by a hash of the seed
and the test's id (the same tests every run and on every machine, whatever else was
collected). Loaded with `-p sample_plugin` and tests/runtime on PYTHONPATH, by the
subsets of the suite that run on other GL implementations (test_gles.py, make
test-zink)."""
import hashlib
import os


def sampled(nodeid: str, seed: str, n: int) -> bool:
    digest = hashlib.sha1(f"{seed}:{nodeid}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % n == 0


def pytest_collection_modifyitems(config, items):
    spec = os.environ.get("FRAGFLOW_TEST_SAMPLE", "")
    if not spec:
        return
    seed, _, n = spec.partition("/")
    n = int(n or 1)
    kept = [item for item in items if sampled(item.nodeid, seed, n)]
    dropped = [item for item in items if not sampled(item.nodeid, seed, n)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept
