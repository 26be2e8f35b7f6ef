"""pytest plugin for tests/mutation/run.py's profile run (`pytest -p profile_plugin` under
`coverage run`): each test's lines go to a coverage context named by its node id, and
each test's time and outcome to the JSON file named by FRAGFLOW_MUTATION_PROFILE."""
import json
import os

import coverage

_seconds: dict[str, float] = {}
_bad: set[str] = set()


def pytest_runtest_setup(item):
    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context(item.nodeid)


def pytest_runtest_teardown(item):
    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context("")


def pytest_runtest_logreport(report):
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration
    if report.outcome != "passed" or hasattr(report, "wasxfail"):
        _bad.add(report.nodeid)   # skipped, failed or xfail: it cannot kill a mutant


def pytest_sessionfinish(session):
    with open(os.environ["FRAGFLOW_MUTATION_PROFILE"], "w") as f:
        json.dump({n: {"seconds": s, "passed": n not in _bad} for n, s in _seconds.items()}, f)
