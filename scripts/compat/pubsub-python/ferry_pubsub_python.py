"""A pytest plugin that runs google-cloud-pubsub's system tests (`tests/system.py` of its
source distribution) against an emulator endpoint — `ferry serve --pubsub-addr` — and
records each test's outcome.

One gap is filled here rather than by editing the distribution's files: the suite's
`project` fixture asks `google.auth.default()` for the project, which needs Google
credentials even though, with PUBSUB_EMULATOR_HOST set, the clients never use them (they
open an insecure channel to the emulator). With PUBSUB_EMULATOR_HOST set,
`google.auth.default` answers anonymous credentials and the project named by
GOOGLE_CLOUD_PROJECT, as it would on a machine whose credentials name that project.

Outcomes go to the file named by FERRY_PS_OUTCOMES, one test a line:
`<outcome>\t<node id>\t<detail>` — outcome `passed`, `failed` (any phase, collection
included; detail: the first line of the error) or `skipped` (detail: the suite's reason).
"""

import os
import re

import google.auth
from google.auth.credentials import AnonymousCredentials


def _emulator_default(scopes=None, request=None, quota_project_id=None, default_scopes=None):
    project = os.environ.get("GOOGLE_CLOUD_PROJECT")
    if not project:
        raise RuntimeError("GOOGLE_CLOUD_PROJECT names the project the system tests use")
    return AnonymousCredentials(), project


if os.environ.get("PUBSUB_EMULATOR_HOST"):
    google.auth.default = _emulator_default

_outcomes = {}


# An `E   ` line naming an exception: `E   google.api_core.exceptions.NotFound: 404 …`.
_RAISED = re.compile(r"^E\s+[\w.]+: ")


def _first_line(report):
    text = getattr(report, "longreprtext", "") or str(report.longrepr or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E ")]
    # The client re-raises gRPC's _InactiveRpcError as an api_core exception whose line
    # names the status and the server's message: the last exception line is the telling one.
    raised = [line for line in errors if _RAISED.match(line)]
    if raised:
        return raised[-1][1:].strip()
    if errors:
        return errors[0][1:].strip()
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
        if now == "passed":
            # The test itself passed; its fixture's clean-up (deleting what it made) failed.
            _record(report.nodeid, "failed", f"[teardown, after a passing test] {_first_line(report)}")
        elif now != "failed":
            _record(report.nodeid, "failed", f"[{report.when}] {_first_line(report)}")
    elif report.skipped and now != "failed":
        _record(report.nodeid, "skipped", _skip_reason(report))
    elif report.when == "call" and report.passed and now is None:
        _record(report.nodeid, "passed", "")


def pytest_collectreport(report):
    if report.failed:
        _record(report.nodeid, "failed", f"[collect] {_first_line(report)}")


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("FERRY_PS_OUTCOMES")
    if not path:
        return
    with open(path, "w") as out:
        for nodeid in sorted(_outcomes):
            outcome, detail = _outcomes[nodeid]
            out.write(f"{outcome}\t{nodeid}\t{detail}\n")
