#!/usr/bin/env python3
"""Tests count_results.py on made-up meson logs: a program that fails after its cases
passed (a leak report at exit) counts as a failure, and nothing is counted twice."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def gtest_suite(test: str, suite: str, cases: dict[str, bool]) -> str:
    body = "".join(
        f'<testcase name="{c}" classname="{suite}">'
        + ("" if ok else '<failure message="boom"/>') + "</testcase>"
        for c, ok in cases.items())
    return f'<testsuite name="flint.{test}.{suite}" tests="{len(cases)}">{body}</testsuite>'


def plain_suite(results: dict[str, bool]) -> str:
    body = "".join(
        f'<testcase name="{t}" classname="flint">'
        + ("" if ok else '<failure message="failed"/>') + "</testcase>"
        for t, ok in results.items())
    return f'<testsuite name="flint" tests="{len(results)}">{body}</testsuite>'


def count(suites: list[str], meson: dict[str, tuple[str, int]]) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as d:
        junit = os.path.join(d, "testlog.junit.xml")
        with open(junit, "w", encoding="utf-8") as f:
            f.write("<testsuites>" + "".join(suites) + "</testsuites>")
        with open(os.path.join(d, "testlog.json"), "w", encoding="utf-8") as f:
            for name, (result, code) in meson.items():
                f.write(json.dumps({"name": name, "result": result, "returncode": code}) + "\n")
        p = subprocess.run([sys.executable, os.path.join(HERE, "count_results.py"), junit],
                           capture_output=True, text=True, check=False)
        return p.returncode, p.stdout.strip().splitlines()[-1]


def main() -> int:
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got}, want {want}")

    engine = "flint:engine / engine"
    c_api = "flint:engine / engine_c_api"
    passing = gtest_suite(engine, "PutTest", {"A": True, "B": True})
    expect("all pass", count([passing, plain_suite({c_api: True})],
                             {engine: ("OK", 0), c_api: ("OK", 0)}), (0, "3 passed, 0 failed"))
    # Every case passed, then the program exited 1 (LeakSanitizer at exit).
    expect("failed at exit", count([passing, plain_suite({c_api: True})],
                                   {engine: ("FAIL", 1), c_api: ("OK", 0)}),
           (1, "3 passed, 1 failed"))
    # A failed case explains meson's FAIL: counted once, not twice.
    failing = gtest_suite(engine, "PutTest", {"A": True, "B": False})
    expect("failed case", count([failing], {engine: ("FAIL", 1)}), (1, "1 passed, 1 failed"))
    # A test without cases of its own: meson's testcase carries the failure.
    expect("plain test", count([passing, plain_suite({c_api: False})],
                               {engine: ("OK", 0), c_api: ("FAIL", 1)}), (1, "2 passed, 1 failed"))
    # A program whose name begins another's: each failure goes to its own program.
    crash, crash_manual = "flint:crash / crash", "flint:crash / crash_manual"
    expect("prefix names", count([gtest_suite(crash, "T", {"A": True}),
                                  gtest_suite(crash_manual, "T", {"A": False})],
                                 {crash: ("TIMEOUT", -15), crash_manual: ("FAIL", 1)}),
           (1, "1 passed, 2 failed"))
    for f in failures:
        print(f)
    print("ok" if not failures else f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
