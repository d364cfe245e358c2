"""A pytest plugin that runs kafka-python's integration tests (from its source distribution)
against an external broker — `ferry serve` — and records each test's outcome.

Two gaps of the source distribution are filled here rather than by editing its files:

* it ships `test/` without `test/__init__.py`, so `import test.testutil` finds the standard
  library's `test` package first; `test` is bound here to the distribution's directory;
* it omits `test/service.py`, which `test/integration/fixtures.py` imports. With `KAFKA_URI`
  set the fixtures only use `ExternalService` (a broker somebody else runs), written below;
  `SpawnedService` (starting a Kafka or ZooKeeper distribution) raises a clear error.

Outcomes go to the file named by FERRY_KP_OUTCOMES, one test a line:
`<outcome>\t<node id>\t<detail>` — outcome `passed`, `failed` (any phase, collection
included; detail: the first line of the error) or `skipped` (detail: the suite's reason).
"""

import os
import sys
import types

_SRC = os.environ.get("FERRY_KP_SRC", os.getcwd())


def _bind_test_package():
    package = types.ModuleType("test")
    package.__path__ = [os.path.join(_SRC, "test")]
    package.__file__ = os.path.join(_SRC, "test", "__init__.py")
    sys.modules["test"] = package

    service = types.ModuleType("test.service")

    class ExternalService:
        """A broker already running at host:port: nothing to start, stop or dump."""

        def __init__(self, host, port):
            self.host = host
            self.port = port

        def open(self):
            pass

        def start(self):
            pass

        def stop(self):
            pass

        def close(self):
            pass

        def dump_logs(self):
            pass

        def wait_for(self, pattern, timeout=30):
            return True

    class SpawnedService:
        def __init__(self, *args, **kwargs):
            raise RuntimeError(
                "kafka-python's source distribution omits test/service.py: this run only "
                "drives an external broker (KAFKA_URI), it cannot spawn Kafka or ZooKeeper"
            )

    service.ExternalService = ExternalService
    service.SpawnedService = SpawnedService
    sys.modules["test.service"] = service
    package.service = service


_bind_test_package()

_outcomes = {}


def _first_line(report):
    text = getattr(report, "longreprtext", "") or str(report.longrepr or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # The `E   ` lines carry the exception; the first of them is the error itself.
    for line in lines:
        if line.startswith("E "):
            return line[1:].strip()
    return lines[-1] if lines else ""


def _skip_reason(report):
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "")


def _record(nodeid, outcome, detail):
    detail = " ".join(detail.split())[:300]
    _outcomes[nodeid] = (outcome, detail)


def pytest_runtest_logreport(report):
    now = _outcomes.get(report.nodeid, (None, ""))[0]
    if report.failed:
        if now != "failed":
            _record(report.nodeid, "failed", f"[{report.when}] {_first_line(report)}")
    elif report.skipped and now != "failed":
        _record(report.nodeid, "skipped", _skip_reason(report))
    elif report.when == "call" and report.passed and now is None:
        _record(report.nodeid, "passed", "")


def pytest_collectreport(report):
    if report.failed:
        _record(report.nodeid, "failed", f"[collect] {_first_line(report)}")


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("FERRY_KP_OUTCOMES")
    if not path:
        return
    with open(path, "w") as out:
        for nodeid in sorted(_outcomes):
            outcome, detail = _outcomes[nodeid]
            out.write(f"{outcome}\t{nodeid}\t{detail}\n")
