#!/usr/bin/env python3
"""The peer benchmark's driver on a tiny workload: FlintKV and LevelDB (the smallest peer)
must find the same keys, every one of them, and report a sane store and memory. With weak
puts (--sync=0) too: every system keeps every key, calls its persist as often as
--persist_every says (each thread after every N of its puts and once at its end) and names
its weak mode in its settings. And transfer, on every system with transactions, durable and
weak: num transactions commit, every key is still there after (--verify=1), the aborts and
the abort rate agree, the settings name the transaction; a system without transactions
refuses it.

usage: agree_test.py FLINTKV_PEERS

Registered by bench/peers/meson.build only where the peers' libraries are installed.
"""
import json
import subprocess
import sys

NUM = 2000
EVERY = 300  # --persist_every of the weak runs: no thread's share is a multiple of it
# What each system's settings() names in its weak mode: its non-synced puts and its persist.
WEAK_SETTINGS = {
    "flintkv": ("WriteOptions::sync = false", "DB::Persist()"),
    "rocksdb": ("WriteOptions::sync = false", "FlushWAL(true)"),
    "leveldb": ("WriteOptions::sync = false", "empty WriteBatch with sync = true"),
    "lmdb": ("MDB_NOSYNC", "mdb_env_sync(env, 1)"),
}


# What each transactional system's settings() names of its transfer.
TXN_SETTINGS = {
    "flintkv": "DB::BeginTransaction",
    "rocksdb-occ": "OptimisticTransactionDB",
    "rocksdb-2pl": "deadlock_detect = true",
    "lmdb": "one write transaction",
}


def run(driver, system, benchmark, threads, *flags):
    out = subprocess.run([driver, f"--system={system}", f"--benchmark={benchmark}",
                          f"--threads={threads}", f"--num={NUM}", *flags],
                         check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    assert len(lines) == 1, f"{system} {benchmark}: one JSON line expected, got {out!r}"
    return json.loads(lines[0])


def expected_persists(puts_per_thread):
    """Each writing thread persists after every EVERY of its puts and once at its end."""
    return sum(puts // EVERY + 1 for puts in puts_per_thread)


def weak_failures(driver):
    failures = []
    weak = ("--sync=0", f"--persist_every={EVERY}")
    for system, named in WEAK_SETTINGS.items():
        # Two threads overwrite their halves of the keys (after a weak fill).
        threads = 2
        result = run(driver, system, "overwrite", threads, *weak)
        where = f"{system} overwrite --sync=0 threads={threads}"
        shares = [NUM * (t + 1) // threads - NUM * t // threads for t in range(threads)]
        if result["ops"] != NUM or result["live_keys"] != NUM:
            failures.append(f"{where}: {result['ops']} puts, {result['live_keys']} live keys")
        if (result["sync"], result.get("persist_every")) != (False, EVERY):
            failures.append(f"{where}: sync {result['sync']}, persist_every "
                            f"{result.get('persist_every')}")
        if result.get("persists") != expected_persists(shares):
            failures.append(f"{where}: {result.get('persists')} persists, expected "
                            f"{expected_persists(shares)}")
        missing = [text for text in named if text not in result["settings"]]
        if missing:
            failures.append(f"{where}: settings do not name {missing}: {result['settings']}")
    for system in ("flintkv", "leveldb"):
        for threads in (1, 2):
            # The readers find every key while the writer's weak puts go on.
            result = run(driver, system, "readwhilewriting", threads, *weak)
            where = f"{system} readwhilewriting --sync=0 threads={threads}"
            if result["found"] != result["ops"] or result["ops"] != NUM:
                failures.append(f"{where}: found {result['found']} of {result['ops']}")
            if result.get("persists") != expected_persists([result["writer_puts"]]):
                failures.append(f"{where}: {result.get('persists')} persists for "
                                f"{result['writer_puts']} writer puts")
    return failures


def transfer_failures(driver):
    failures = []
    for system, named in TXN_SETTINGS.items():
        for threads, flags in ((1, ()), (2, ()), (2, ("--sync=0", f"--persist_every={EVERY}"))):
            result = run(driver, system, "transfer", threads, "--verify=1", *flags)
            where = f"{system} transfer threads={threads} {' '.join(flags)}".rstrip()
            if result["ops"] != NUM or result["verified_keys"] != NUM:
                failures.append(f"{where}: {result['ops']} transactions, "
                                f"{result['verified_keys']} of {NUM} keys found after")
            aborts = result.get("aborts")
            if not isinstance(aborts, int) or aborts < 0:
                failures.append(f"{where}: no aborts field: {result}")
                continue
            if abs(result.get("abort_rate", -1) - aborts / (aborts + NUM)) > 1e-9:
                failures.append(f"{where}: abort_rate {result.get('abort_rate')} for "
                                f"{aborts} aborts")
            if system == "lmdb" and aborts != 0:
                failures.append(f"{where}: {aborts} aborts in LMDB's serial writer")
            if flags:
                shares = [NUM * (t + 1) // threads - NUM * t // threads
                          for t in range(threads)]
                if result.get("persists") != expected_persists(shares):
                    failures.append(f"{where}: {result.get('persists')} persists, expected "
                                    f"{expected_persists(shares)}")
            if named not in result["settings"] or "transfer" not in result["settings"]:
                failures.append(f"{where}: settings do not name {named!r}: "
                                f"{result['settings']}")
    refused = subprocess.run([driver, "--system=leveldb", "--benchmark=transfer",
                              f"--num={NUM}"], capture_output=True, text=True)
    if refused.returncode != 2 or "no transactions" not in refused.stderr:
        failures.append(f"leveldb transfer: exit {refused.returncode}, {refused.stderr!r}")
    return failures


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
                # DRAM: LevelDB's is its resident memory; FlintKV's leaves its pool out.
                dram, rss = result.get("peak_dram_bytes"), result["peak_rss_bytes"]
                if (dram is None or not 0 < dram <= rss or
                        (system == "leveldb" and dram != rss)):
                    failures.append(f"{where}: peak DRAM {dram}, peak resident {rss}")
            if r["flintkv"]["found"] != r["leveldb"]["found"]:
                failures.append(f"{benchmark} threads={threads}: FlintKV found "
                                f"{r['flintkv']['found']}, LevelDB {r['leveldb']['found']}")
            for system, result in r.items():
                if result["sync"] is not True or "persists" in result:
                    failures.append(f"{system} {benchmark} threads={threads}: not a sync run: "
                                    f"sync {result['sync']}, {result.get('persists')} persists")
    failures += weak_failures(driver)
    failures += transfer_failures(driver)
    for failure in failures:
        print(failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
