#!/usr/bin/env python3
"""Counts test cases from the JUnit files meson writes (with GoogleTest's cases inside).

Prints "N passed, N failed" (and ", N skipped" when any were); exits 1 if any failed or if
no test ran at all.

A test program can fail after all its cases passed: a sanitizer's leak report at exit, or a
crash in a destructor, makes it exit non-zero, and meson then marks it failed although the
JUnit file holds only passing cases. So each JUnit file's meson log beside it
(testlog.json) is read too, and a program meson marked failed without a failed case counts
as one failed case of its own, named on a line before the count.
"""
import json
import os
import sys
import xml.etree.ElementTree as ET

FAILED_RESULTS = {"FAIL", "TIMEOUT", "ERROR", "UNEXPECTEDPASS", "INTERRUPT"}


def failed_case(case: ET.Element) -> bool:
    return case.find("failure") is not None or case.find("error") is not None


def owner(suite_name: str, programs: list[str]) -> str | None:
    """The meson test a JUnit suite came from: GoogleTest suites are named
    "<project>.<meson test name>.<suite>", meson's own "<project>"."""
    rest = suite_name.split(".", 1)[1] if "." in suite_name else ""
    for name in programs:
        if rest.startswith(name + "."):
            return name
    return None


def silent_failures(junit_path: str, root: ET.Element) -> list[str]:
    """Meson tests of junit_path's run that failed with no failed case to show for it."""
    log = os.path.join(os.path.dirname(junit_path), "testlog.json")
    try:
        with open(log, encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []  # no meson log beside it: the cases are all there is
    failed = {r["name"]: r for r in records if r.get("result") in FAILED_RESULTS}
    if not failed:
        return []
    shown = set()
    programs = sorted(failed, key=len, reverse=True)  # longest first: "a.b" before "a"
    for suite in root.iter("testsuite"):
        name = owner(suite.attrib.get("name", ""), programs)
        for case in suite.iter("testcase"):
            if not failed_case(case):
                continue
            shown.add(name if name is not None else case.attrib.get("name"))
    return [f"{n}: {r['result']} (exit status {r.get('returncode')}) after its cases passed"
            for n, r in failed.items() if n not in shown]


def main(paths: list[str]) -> int:
    cases = []
    extra = []
    for path in paths:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            print(f"cannot read test results {path}: {e}", file=sys.stderr)
            print("0 passed, 1 failed")
            return 1
        cases.extend(root.iter("testcase"))
        extra.extend(silent_failures(path, root))
    passed = failed = skipped = 0
    for case in cases:
        if failed_case(case):
            failed += 1
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    for line in extra:
        print(f"failed: {line}")
    failed += len(extra)
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["build/meson-logs/testlog.junit.xml"]))
