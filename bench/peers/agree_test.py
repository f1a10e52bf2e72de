#!/usr/bin/env python3
"""The peer benchmark's driver on a tiny workload: FlintKV and LevelDB (the smallest peer)
must find the same keys, every one of them, and report a sane store and memory.

usage: agree_test.py FLINTKV_PEERS

Registered by bench/peers/meson.build only where the peers' libraries are installed.
"""
import json
import subprocess
import sys

NUM = 2000


def run(driver, system, benchmark, threads):
    out = subprocess.run([driver, f"--system={system}", f"--benchmark={benchmark}",
                          f"--threads={threads}", f"--num={NUM}"],
                         check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    assert len(lines) == 1, f"{system} {benchmark}: one JSON line expected, got {out!r}"
    return json.loads(lines[0])


def main():
    driver = sys.argv[1]
    failures = []
    for benchmark in ("readrandom", "seekrandom", "readwhilewriting"):
        for threads in (1, 2):
            r = {s: run(driver, s, benchmark, threads) for s in ("flintkv", "leveldb")}
            for system, result in r.items():
                where = f"{system} {benchmark} threads={threads}"
                # Every key was written by the fill and none is deleted: every read finds.
                if result["found"] != result["ops"] or result["ops"] != NUM:
                    failures.append(f"{where}: found {result['found']} of {result['ops']}")
                if result["live_keys"] != NUM or not result["store_bytes"] > 0:
                    failures.append(f"{where}: {result['live_keys']} live keys, "
                                    f"{result['store_bytes']} store bytes")
                if not result["peak_rss_bytes"] > 0 or not result["settings"]:
                    failures.append(f"{where}: no peak resident memory or settings")
            if r["flintkv"]["found"] != r["leveldb"]["found"]:
                failures.append(f"{benchmark} threads={threads}: FlintKV found "
                                f"{r['flintkv']['found']}, LevelDB {r['leveldb']['found']}")
    for failure in failures:
        print(failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
