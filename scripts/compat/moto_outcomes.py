"""A pytest plugin: writes one line per test, `<outcome> <node id>`, to the file named by
FERRY_MOTO_OUTCOMES. The outcome is `passed`, `failed` (any phase failed, collection
included) or `skipped`."""

import os

_outcomes = {}


def pytest_runtest_logreport(report):
    now = _outcomes.get(report.nodeid)
    if report.failed:
        _outcomes[report.nodeid] = "failed"
    elif report.skipped and now != "failed":
        _outcomes[report.nodeid] = "skipped"
    elif report.when == "call" and report.passed and now is None:
        _outcomes[report.nodeid] = "passed"


def pytest_collectreport(report):
    if report.failed:
        _outcomes[report.nodeid] = "failed"


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("FERRY_MOTO_OUTCOMES")
    if not path:
        return
    with open(path, "w") as out:
        for nodeid in sorted(_outcomes):
            out.write(f"{_outcomes[nodeid]} {nodeid}\n")
