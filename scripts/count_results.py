#!/usr/bin/env python3
"""Counts test cases from the JUnit files meson writes (with GoogleTest's cases inside).

Prints "N passed, N failed" (and ", N skipped" when any were); exits 1 if any failed or if
no test ran at all.
"""
import sys
import xml.etree.ElementTree as ET


def main(paths: list[str]) -> int:
    cases = []
    for path in paths:
        try:
            cases.extend(ET.parse(path).getroot().iter("testcase"))
        except (OSError, ET.ParseError) as e:
            print(f"cannot read test results {path}: {e}", file=sys.stderr)
            print("0 passed, 1 failed")
            return 1
    passed = failed = skipped = 0
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["build/meson-logs/testlog.junit.xml"]))
