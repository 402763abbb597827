"""JUnit XML: parses back, has the elements and attributes JUnit consumers read, counts add up.

The structure rules below are the common JUnit dialect (Jenkins' junit-10.xsd, GitLab,
pytest --junitxml). Where lxml is installed (the test extras bring it; CI has it) the file is also
validated against an XSD of that dialect.
"""
import xml.etree.ElementTree as ET

import pytest

from nccl_bench.core import junit
from nccl_bench.accept.verdicts import Verdict
from nccl_bench.core.errors import UsageError

# element -> (required attributes, allowed children)
RULES = {
    "testsuites": ({"name", "tests", "failures", "errors", "time"}, {"testsuite"}),
    "testsuite": ({"name", "tests", "failures", "errors", "skipped", "time", "timestamp", "hostname"},
                  {"properties", "testcase", "system-out", "system-err"}),
    "properties": (set(), {"property"}),
    "property": ({"name", "value"}, set()),
    "testcase": ({"name", "classname", "time"}, {"failure", "error", "skipped", "system-out", "system-err"}),
    "failure": ({"message", "type"}, set()),
    "error": ({"message", "type"}, set()),
    "skipped": (set(), set()),
    "system-out": (set(), set()),
    "system-err": (set(), set()),
}
INTEGER_ATTRS = ("tests", "failures", "errors", "skipped")

XSD = """<?xml version="1.0" encoding="UTF-8"?>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" elementFormDefault="qualified">
  <xs:complexType name="message" mixed="true">
    <xs:attribute name="message" type="xs:string"/>
    <xs:attribute name="type" type="xs:string"/>
  </xs:complexType>
  <xs:element name="testsuites">
    <xs:complexType>
      <xs:sequence><xs:element ref="testsuite" minOccurs="0" maxOccurs="unbounded"/></xs:sequence>
      <xs:attribute name="name" type="xs:string"/>
      <xs:attribute name="tests" type="xs:nonNegativeInteger"/>
      <xs:attribute name="failures" type="xs:nonNegativeInteger"/>
      <xs:attribute name="errors" type="xs:nonNegativeInteger"/>
      <xs:attribute name="skipped" type="xs:nonNegativeInteger"/>
      <xs:attribute name="disabled" type="xs:nonNegativeInteger"/>
      <xs:attribute name="time" type="xs:decimal"/>
    </xs:complexType>
  </xs:element>
  <xs:element name="testsuite">
    <xs:complexType>
      <xs:sequence>
        <xs:element name="properties" minOccurs="0">
          <xs:complexType><xs:sequence>
            <xs:element name="property" minOccurs="0" maxOccurs="unbounded">
              <xs:complexType>
                <xs:attribute name="name" type="xs:string" use="required"/>
                <xs:attribute name="value" type="xs:string" use="required"/>
              </xs:complexType>
            </xs:element>
          </xs:sequence></xs:complexType>
        </xs:element>
        <xs:element name="testcase" minOccurs="0" maxOccurs="unbounded">
          <xs:complexType>
            <xs:sequence>
              <xs:choice minOccurs="0">
                <xs:element name="skipped" type="message"/>
                <xs:element name="failure" type="message" maxOccurs="unbounded"/>
                <xs:element name="error" type="message" maxOccurs="unbounded"/>
              </xs:choice>
              <xs:element name="system-out" type="xs:string" minOccurs="0" maxOccurs="unbounded"/>
              <xs:element name="system-err" type="xs:string" minOccurs="0" maxOccurs="unbounded"/>
            </xs:sequence>
            <xs:attribute name="name" type="xs:string" use="required"/>
            <xs:attribute name="classname" type="xs:string" use="required"/>
            <xs:attribute name="time" type="xs:decimal" use="required"/>
            <xs:attribute name="assertions" type="xs:string"/>
            <xs:attribute name="status" type="xs:string"/>
          </xs:complexType>
        </xs:element>
        <xs:element name="system-out" type="xs:string" minOccurs="0"/>
        <xs:element name="system-err" type="xs:string" minOccurs="0"/>
      </xs:sequence>
      <xs:attribute name="name" type="xs:string" use="required"/>
      <xs:attribute name="tests" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="failures" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="errors" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="skipped" type="xs:nonNegativeInteger"/>
      <xs:attribute name="disabled" type="xs:nonNegativeInteger"/>
      <xs:attribute name="time" type="xs:decimal" use="required"/>
      <xs:attribute name="timestamp" type="xs:dateTime"/>
      <xs:attribute name="hostname" type="xs:string"/>
      <xs:attribute name="id" type="xs:string"/>
      <xs:attribute name="package" type="xs:string"/>
    </xs:complexType>
  </xs:element>
</xs:schema>
"""


def validate(root: ET.Element) -> None:
    """Every element known, required attributes present, counts consistent with the cases."""
    for el in root.iter():
        assert el.tag in RULES, el.tag
        required, children = RULES[el.tag]
        assert required <= set(el.attrib), (el.tag, required - set(el.attrib))
        assert {c.tag for c in el} <= children, (el.tag, {c.tag for c in el} - children)
        for a in INTEGER_ATTRS:
            if a in el.attrib:
                assert int(el.get(a)) >= 0
        if "time" in el.attrib:
            float(el.get("time"))
    for suite in root.iter("testsuite"):
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        for tag, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            assert int(suite.get(attr)) == sum(c.find(tag) is not None for c in cases)
        for c in cases:
            assert sum(c.find(t) is not None for t in ("failure", "error", "skipped")) <= 1
    for attr in INTEGER_ATTRS:
        if attr in root.attrib:
            assert int(root.get(attr)) == sum(int(s.get(attr)) for s in root.iter("testsuite"))


def sample_suites():
    verdicts = [Verdict("busbw all_reduce 1 GiB", "pass", 340.2, ">= 312.1 GB/s"),
                Verdict("busbw all_gather 1 GiB", "fail", 12.5, ">= 255.9 GB/s"),
                Verdict("init median", "skip", None, "<= 100 ms", "not measured in this run"),
                Verdict("wrong results", "fail", 3, "<= 0", "<&> \"quoted\" ünïcode")]
    checks = [{"name": "ecc", "status": "pass", "evidence": "volatile 0", "action": "", "rank": 0, "host": "n1"},
              {"name": "shm", "status": "warn", "evidence": "1 stale", "action": "rm", "rank": 0, "host": "n1"},
              {"name": "nvlink", "status": "skip", "evidence": "no NVML", "action": "", "rank": 1, "host": "n1"},
              {"name": "ranks_alive", "status": "fail", "evidence": "missing rank 1", "action": "x", "rank": None,
               "host": ""}]
    accept = junit.suite_from_verdicts("accept.h200x2", verdicts)
    accept.properties = {"profile": "h200x2", "backend": "nccl"}
    return [accept, junit.suite_from_checks("doctor", checks)]


def test_written_file_parses_back_with_right_counts(tmp_path):
    path = junit.write(tmp_path / "report.xml", *sample_suites())
    root = ET.parse(path).getroot()
    validate(root)
    assert (root.get("tests"), root.get("failures"), root.get("skipped"), root.get("errors")) == ("8", "3", "2", "0")
    accept, doctor = root.findall("testsuite")
    failed = [c for c in accept.findall("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["busbw all_gather 1 GiB", "wrong results"]
    msg = failed[0].find("failure").get("message")
    assert "measured 12.5" in msg and ">= 255.9 GB/s" in msg
    assert "<&> \"quoted\" ünïcode" in failed[1].find("failure").text  # escaped and read back intact
    assert accept.find("properties/property[@name='profile']").get("value") == "h200x2"
    warn = next(c for c in doctor.findall("testcase") if c.get("name").startswith("shm"))
    assert warn.find("failure") is None and warn.find("system-out").text.startswith("WARN")


def test_validates_against_junit_xsd(tmp_path):
    etree = pytest.importorskip("lxml.etree", reason="lxml not installed here (pip install .[test])")
    path = junit.write(tmp_path / "report.xml", *sample_suites())
    schema = etree.XMLSchema(etree.fromstring(XSD.encode()))
    doc = etree.parse(str(path))
    assert schema.validate(doc), schema.error_log


def test_empty_suite_is_valid(tmp_path):
    root = ET.parse(junit.write(tmp_path / "e.xml", junit.Suite("empty"))).getroot()
    validate(root)
    assert root.get("tests") == "0"


def test_never_overwrites(tmp_path):
    p = tmp_path / "r.xml"
    p.write_text("keep")
    with pytest.raises(UsageError, match="already exists"):
        junit.write(p, junit.Suite("s"))
    with pytest.raises(UsageError, match="already exists"):
        junit.check_writable(p)
    assert p.read_text() == "keep"
