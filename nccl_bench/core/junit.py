"""JUnit XML, so CI systems show each acceptance or doctor check as a test case.

The common dialect that Jenkins, GitLab, GitHub test reporters and pytest's own
--junitxml agree on: <testsuites> holding <testsuite name tests failures errors skipped
time timestamp hostname>, each <testcase name classname time> with at most one
<failure message type> or <skipped message>, and <system-out> for evidence. JUnit has no
"warning": a warned check passes and says WARN in its system-out.
"""
from __future__ import annotations

import socket
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from nccl_bench.core.errors import UsageError

CASE_STATUSES = ("pass", "fail", "skip", "error")


@dataclass
class Case:
    name: str
    classname: str
    status: str = "pass"  # pass | fail | skip | error
    message: str = ""  # one line: the failure or skip reason
    detail: str = ""  # longer text: the failure body or the evidence (system-out)
    seconds: float = 0.0

    def __post_init__(self):
        if self.status not in CASE_STATUSES:
            raise ValueError(f"junit case {self.name}: status must be one of {CASE_STATUSES}, got {self.status!r}")


@dataclass
class Suite:
    name: str
    cases: list[Case] = field(default_factory=list)
    properties: dict = field(default_factory=dict)
    timestamp: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S"))
    hostname: str = field(default_factory=socket.gethostname)

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.cases)


def _suite_element(s: Suite, index: int) -> ET.Element:
    seconds = sum(c.seconds for c in s.cases)
    el = ET.Element("testsuite", {
        "name": s.name, "tests": str(len(s.cases)), "failures": str(s.count("fail")),
        "errors": str(s.count("error")), "skipped": str(s.count("skip")), "time": f"{seconds:.3f}",
        "timestamp": s.timestamp, "hostname": s.hostname, "id": str(index)})
    if s.properties:
        props = ET.SubElement(el, "properties")
        for k, v in s.properties.items():
            ET.SubElement(props, "property", {"name": str(k), "value": str(v)})
    for c in s.cases:
        case = ET.SubElement(el, "testcase", {"name": c.name, "classname": c.classname, "time": f"{c.seconds:.3f}"})
        if c.status in ("fail", "error"):
            tag = "failure" if c.status == "fail" else "error"
            body = ET.SubElement(case, tag, {"message": c.message, "type": "AssertionError" if tag == "failure"
                                             else "Error"})
            body.text = c.detail or c.message
        elif c.status == "skip":
            ET.SubElement(case, "skipped", {"message": c.message})
        if c.detail and c.status in ("pass", "skip"):
            ET.SubElement(case, "system-out").text = c.detail
    return el


def to_element(suites: list[Suite], name: str = "nccl_bench") -> ET.Element:
    root = ET.Element("testsuites", {
        "name": name, "tests": str(sum(len(s.cases) for s in suites)),
        "failures": str(sum(s.count("fail") for s in suites)), "errors": str(sum(s.count("error") for s in suites)),
        "skipped": str(sum(s.count("skip") for s in suites)),
        "time": f"{sum(c.seconds for s in suites for c in s.cases):.3f}"})
    for i, s in enumerate(suites):
        root.append(_suite_element(s, i))
    return root


def to_string(suites: list[Suite], name: str = "nccl_bench") -> str:
    root = to_element(suites, name)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def check_writable(path: str | Path | None) -> None:
    """Fail early (exit 2) if the --junit file exists or its folder is missing."""
    from nccl_bench.core.results import check_writable as check
    check(path, "--junit")


def write(path: str | Path, *suites: Suite, name: str = "nccl_bench") -> Path:
    """Write the suites to `path`; an existing file is never overwritten."""
    p = Path(path)
    try:
        with open(p, "x", encoding="utf-8") as f:
            f.write(to_string(list(suites), name))
    except FileExistsError:
        raise UsageError(f"{p} already exists; reports are never overwritten") from None
    return p


# --- adapters from this project's results ---------------------------------------------------------
def suite_from_verdicts(name: str, verdicts) -> Suite:
    """verdicts.Verdict list -> one suite, one case per check."""
    cases = []
    for v in verdicts:
        cases.append(Case(name=v.check, classname=name, status=v.status, message=v.message(),
                          detail=v.message()))
    return Suite(name, cases)


def suite_from_checks(name: str, checks: list[dict]) -> Suite:
    """doctor's check dicts -> one suite; warn passes with WARN in system-out."""
    cases = []
    for c in checks:
        where = "all ranks" if c.get("rank") is None else f"rank {c['rank']}"
        text = f"{c['status'].upper()}: {c['evidence']}" + (f" | action: {c['action']}" if c.get("action") else "")
        status = {"pass": "pass", "warn": "pass", "fail": "fail", "skip": "skip"}[c["status"]]
        cases.append(Case(name=f"{c['name']} [{where}]", classname=f"{name}.{c.get('host') or 'job'}",
                          status=status, message=f"{c['name']} ({where}): {c['evidence']}", detail=text))
    return Suite(name, cases)
