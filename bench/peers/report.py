#!/usr/bin/env python3
"""Writes docs/peers.md and docs/peers.png from the runs bench/peers/run.sh collected.

usage: report.py OUT_DIR REPORT.md PLOT.png COMMAND
       report.py --placeholder REPORT.md     (the page before any run: no figures)

OUT_DIR holds results.jsonl (one JSON object per run, as flintkv_peers prints it, with the
run's number added), uptime-before and uptime-after. The plot is drawn with gnuplot.
Runs with "sync": false (flintkv_peers --sync=0; a line without "sync" is a sync run) go
into their own section, "Writes not synced on return", with ratios to FlintKV's weak mode.
The transfer runs (either mode) go into "Transactions", with their abort rates.
"""
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from machine import cpu_model, read_text  # noqa: E402  (bench/machine.py)

SYSTEMS = [("flintkv", "FlintKV"), ("rocksdb", "RocksDB"), ("leveldb", "LevelDB"),
           ("lmdb", "LMDB")]
BENCHMARKS = ["fillrandom", "readrandom", "seekrandom", "overwrite", "readwhilewriting"]
# The workloads whose timed part writes: the only ones run with weak puts (run.sh).
WEAK_BENCHMARKS = ["fillrandom", "overwrite", "readwhilewriting"]
# The columns of "Transactions": RocksDB's two transaction databases in place of plain
# RocksDB; LevelDB, which has no transactions, always "–".
TXN_SYSTEMS = [("flintkv", "FlintKV"), ("rocksdb-occ", "RocksDB OCC"),
               ("rocksdb-2pl", "RocksDB 2PL"), ("leveldb", "LevelDB"), ("lmdb", "LMDB")]
LABELS = dict(SYSTEMS + TXN_SYSTEMS)

INTRO = """\
FlintKV beside three embedded stores a user would weigh against it: RocksDB, LevelDB and LMDB,
as Debian 12 ships them (librocksdb-dev 7.8, libleveldb-dev 1.23, liblmdb-dev 0.9.24). PMDK's
`concurrent_map`, which issue 12 also lists, is not measured here.

One driver, `bench/peers/flintkv_peers`, has a backend per system (`bench/peers/*_store.cpp`)
and generates the workload of `flintkv bench` (`engine/tools/workload.hpp`): the same keys
(decimal numbers zero-padded to 16 bytes), values (64 bytes from one buffer of random letters),
seeds per benchmark and thread, and key distribution. Each measurement is a fresh process and
a fresh store in /dev/shm: the read workloads fill the store first (untimed, in the same
process, as `flintkv bench --benchmarks=fillrandom,<workload>` does), then wait (untimed)
until the background work the fill left is done, as far as each system can tell, and then
time the workload, so that it meets an existing, settled store (as db_bench's
`--use_existing_db` does) whatever pace each system's background work has. FlintKV waits
with `DB::WaitForMerges` (its merge thread has moved the fill's keys into the packed tier
and merged the tier into one run); RocksDB polls `rocksdb.num-running-flushes`,
`num-running-compactions`, `mem-table-flush-pending` and `compaction-pending` until all are
0; LevelDB has no way to tell (nothing is waited for: its reads may meet a compaction the
fill started); LMDB has no background work. The JSON line of each run says how long the
wait took (`settle_seconds`).

| workload | what is timed |
|---|---|
| fillrandom | every key 0 .. num-1 put once, in a random order; each thread its share of the keys |
| readrandom | num gets of keys drawn uniformly over [0, num) (every one is found) |
| seekrandom | num times: the session's iterator refreshed (FlintKV and RocksDB: `Iterator::Refresh`; LMDB: its read transaction and cursor renewed; LevelDB, which has no Refresh: a new iterator), Seek to a random key, then 10 Next |
| overwrite | every key put once more, in a new random order |
| readwhilewriting | T threads do readrandom while one more thread puts random keys until they are done (at most num puts); the readers' ops/s |
| transfer | num transactions, each reading two keys drawn uniformly over [0, num) and writing both; in the systems with transactions only (section "Transactions") |

With T threads the operations are split in T shares that start together at a barrier; ops/s
is all operations over the time from the first thread's start to the last one's end."""

SETTINGS = """\
| system | write buffer | block cache | bloom filter | compression | a put is durable on return by |
|---|---|---|---|---|---|
| FlintKV | none (writes go to the pool) | none (a DRAM index over the persistent list) | none | none | default options: the node and links flushed (pwb) and fenced (pfence) before Put returns |
| RocksDB 7.8 | 64 MiB (default) | 8 MiB LRU (default) | 10 bits/key | off (also bottommost) | `WriteOptions::sync = true`: the WAL synced |
| LevelDB 1.23 | 4 MiB (default) | 8 MiB LRU (default) | 10 bits/key | off | `WriteOptions::sync = true`: the log synced |
| LMDB 0.9.24 | none | none (reads through its memory map) | none | none | one write transaction per put, committed with the default flags (no `MDB_NOSYNC`, `MDB_NOMETASYNC`, `MDB_WRITEMAP`): data and meta page synced; `MDB_NOTLS`; one writer at a time, so concurrent puts queue for the write lock |

These are the settings of the main figures, where every put is durable on return. With weak
puts among the modes run (`SYNC="1 0"`, the default), the section "Writes not synced on
return" below runs the writing workloads again with each system's weak puts and its call
that makes them durable; its own table gives those settings.
Every other option is the library's default. FlintKV's pool is sized as `flintkv bench`
sizes it; LMDB's map is at least 1 GiB (address space only: the data file grows as pages
are written)."""

NOTES = """\
## Read this before the figures

- **"Durable" on /dev/shm.** /dev/shm is tmpfs, memory without a device behind it. There,
  RocksDB's and LevelDB's log sync and LMDB's commit sync (fdatasync / fsync / msync) cost a
  system call each but write nothing to any device: they are near no-ops. FlintKV's flush
  instructions (the build's write-back instruction, clwb where the CPU has it, and a fence)
  run exactly as they would on persistent memory, on the pool's cache lines. On a real
  device, each synced put of the peers would wait for the device's write. So these figures favour the peers' writes: they show each
  system's software path with durability requested, not the cost of a device.
- **Assertions.** Debian builds RocksDB and LevelDB with their assertions enabled (no
  `-DNDEBUG`); a release build of either may be somewhat faster. FlintKV is built as
  `scripts/run` builds it (release, assertions on: `b_ndebug=false`).
- **Bytes per live key** is the store's size after the workload, once the store has
  settled again as after the fill (untimed: the background work the workload started is
  done as far as each system can tell, so that the figure does not depend on where that
  work stood when the timer stopped; LevelDB cannot tell, so its figure may include a
  compaction's old and new files; `final_settle_seconds` in the JSON line), divided by the keys present:
  for RocksDB, LevelDB and LMDB the sizes of every file in the store's directory (RocksDB's
  and LevelDB's write-ahead log, which holds what the memtable has not yet flushed, MANIFEST
  and LOG included; LMDB's data file with its free pages, and its lock file); for FlintKV the pool's
  bytes in use (`Stats::pool_used`), not the pool file's size. Live keys: FlintKV's and
  LMDB's own counts; for RocksDB and LevelDB num (every workload leaves each key once).
- **Peak resident memory** is the process's `ru_maxrss` (getrusage) at the end, the fill
  included. It counts the pages of a mapped file that the process touched: FlintKV's pool
  and LMDB's map, which is where their data lives. RocksDB and LevelDB read their files with
  `pread` into their block cache, so the files' pages in the kernel's page cache (tmpfs) are
  not counted: their figure is the memtables, block cache, index and filter blocks.
- **Peak DRAM** is the memory each system needs of DRAM on the hardware it is built for.
  For RocksDB, LevelDB and LMDB it is their peak resident memory as above (LMDB's map is
  the page cache, DRAM on any device). FlintKV's pool stands for persistent memory (NVM,
  CXL memory), which on such a machine is not DRAM: its figure is the peak of the process's
  resident memory without the pool's pages (`RssAnon` + `RssFile` of `/proc/self/status`,
  without `RssShmem`, the pool being the process's only shared-memory mapping), sampled
  every 5 ms by the driver, so a peak shorter than that may be missed. The pool's pages
  are in the row above; what the pool holds is the bytes per live key.
- **One machine, shared.** The load average before and after is in the header; a figure
  from a loaded machine says little."""


WEAK_INTRO = """\
The workloads that write, run again with puts that return before they are durable, in each
system's own non-synced mode, and a call that makes them durable (*persist*, below): each
thread calls it after every {every} of its puts and once at its end, inside the timed run
(`flintkv_peers --sync=0 --persist_every={every}`; the untimed fill of overwrite and
readwhilewriting is weak too, as in `flintkv bench --sync=0`). Everything else is as above.

| system | a put returns once it is | persist | what persist makes durable |
|---|---|---|---|
| FlintKV | `WriteOptions::sync = false`: its node, version and link stored, none of them written back or fenced (noted for the next persist); visible to readers | `DB::Persist()` (`Options::persist_interval` off) | every write visible when it was called (the noted words written back and fenced). The engine also persists by itself at a few points (a sync write or batch, a full list of noted words). A crash recovers the writes up to some point of their order |
| RocksDB 7.8 | `WriteOptions::sync = false`: appended to the WAL file (written to the kernel, not synced) and to the memtable | `DB::FlushWAL(true)`: with the default `manual_wal_flush = false` this is `SyncWAL()` | every WAL file not yet synced, older ones included: every earlier put |
| LevelDB 1.23 | `WriteOptions::sync = false`: appended to the log file (written to the kernel, not synced) and to the memtable | a write of an empty `WriteBatch` with `sync = true`: LevelDB has no call that only syncs its log | the current log file. A log that LevelDB switched away from (when a 4 MiB memtable filled) was closed unsynced: its puts are durable once the background flush of that memtable into a table file (synced, and recorded in the synced MANIFEST) has finished |
| LMDB 0.9.24 | `MDB_NOSYNC` (without `MDB_WRITEMAP`; `MDB_NOMETASYNC`, which spares only the meta page's sync, adds nothing to it): its own write transaction, committed, its pages and meta page written with `pwrite`, nothing synced | `mdb_env_sync(env, 1)`: fdatasync of the data file | every committed transaction |

**"Durable" in this mode, on /dev/shm.** In the three peers a put that returned has been
written to the kernel, into the page cache, which on /dev/shm is all there is: a crash of
the process loses none of them (LevelDB's documentation says so of `sync = false`); only a
crash of the machine would, and on /dev/shm that loses every put, persisted or not.
FlintKV's recovery keeps only what a persist covered (it cannot tell which later words
reached persistent memory), so a crash of the process may lose its puts since the last
persist: the prefix a power failure on persistent memory would leave. The peers' persist is a
system call (fdatasync on tmpfs) that writes nothing to any device, where on a disk or SSD it
would wait for the device; FlintKV's `Persist()` runs its write-backs and fences as on
persistent memory. So this section compares each system's write path with durability
deferred, and its persist at the cost this medium gives it: that favours the peers, whose
persist elsewhere would wait for a device write once per thread and persist interval."""


TXN_INTRO = """\
Each operation is a transaction, as in `flintkv bench --benchmarks=fillrandom,transfer`:
after the untimed fill, read two keys drawn uniformly over [0, num) (the same key, now and
then), put a new value for each, commit. An attempt that fails on a conflict is abandoned,
nothing of it applied, and begun again with new values; its time counts in the run's. ops/s
counts committed transactions; the abort rate is the aborted attempts over all attempts
(`flintkv_peers --benchmark=transfer`, fields `aborts` and `abort_rate`). A commit is
durable on return as each system's put is above (FlintKV: a batch, its nodes fenced before it is attached and its links flushed and fenced;
RocksDB: the WAL synced, `WriteOptions::sync = true`; LMDB: a synced commit); with weak
puts (when that mode was run) it is weak as they are, and each thread persists after every
{every} of its committed transactions and at its end.

RocksDB's transaction databases have the options of RocksDB above (write buffer, block
cache, bloom filter, compression), and their fill is RocksDB's plain puts through them.

| system | a transfer | isolation | a conflict |
|---|---|---|---|
| FlintKV | `DB::BeginTransaction` with the puts' `WriteOptions`, `Get` of both keys, `Put` of both, `Commit` | serializable: optimistic, validated at commit (a key read or written got a version after the transaction's snapshot) | `Commit` returns Busy; nothing waits |
| RocksDB OCC | `OptimisticTransactionDB` (`kValidateParallel`, the default), `BeginTransaction` without a snapshot, `GetForUpdate` of both keys, `Put` of both, `Commit` | serializable for this workload: `Commit` checks that no key read with `GetForUpdate` was written since it was read (every key read is written) | `Commit` returns Busy (TryAgain if the memtable history kept for the check, `max_write_buffer_size_to_maintain` -1, no longer tells) |
| RocksDB 2PL | `TransactionDB` (pessimistic, write-committed), the same calls, `TransactionOptions::deadlock_detect = true` | strict two-phase locking: `GetForUpdate` takes the key's exclusive lock until `Commit` (keys locked in the transaction's order, not sorted) | a lock that would close a deadlock fails at once with Busy; a lock wait longer than the lock timeout (1 s, the default) fails with TimedOut; any other conflict waits for the lock |
| LevelDB | none: no transactions (a `WriteBatch` is atomic but reads nothing) | – | – |
| LMDB | one write transaction: `mdb_get` of both keys, `mdb_put` of both, a synced commit | serial: one writer at a time | none: writers queue for LMDB's write lock |"""


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def si(v):
    if v is None:
        return "–"
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if v >= 1e3:
        return f"{v / 1e3:.0f}k"
    return f"{v:.0f}"


def load_average(uptime):
    """The three load averages of an `uptime` line."""
    return uptime.split("load average:")[-1].strip() if "load average:" in uptime else uptime


def load(out_dir):
    results = []
    with open(os.path.join(out_dir, "results.jsonl")) as f:
        for line in f:
            if line.strip():
                results.append(json.loads(line))
    return results


def cell(value, flintkv, text):
    """`text(value)`, and for a peer the ratio FlintKV / peer."""
    if value is None:
        return "–"
    if flintkv is None or value == 0:
        return text(value)
    return f"{text(value)} ({flintkv / value:.2f})"


def table(w, title, explanation, points, systems, metric, text):
    w(f"### {title}")
    w("")
    w(explanation)
    w("")
    w("| workload | threads | " + " | ".join(label for _, label in systems) + " |")
    w("|---|---:|" + "---:|" * len(systems))
    for bench, t in points:
        values = {s: metric(bench, t, s) for s, _ in systems}
        flintkv = values.get("flintkv")
        cells = [text(values[s]) if values[s] is not None and s == "flintkv"
                 else cell(values[s], flintkv, text) for s, _ in systems]
        w(f"| {bench} | {t} | " + " | ".join(cells) + " |")
    w("")


def plot(points, systems, ops, out_dir, png):
    data = os.path.join(out_dir, "plot.dat")
    with open(data, "w") as f:
        f.write("point " + " ".join(label for _, label in systems) + "\n")
        for bench, t in points:
            row = [ops(bench, t, s) for s, _ in systems]
            f.write(f"{bench}/{t}thr " + " ".join(
                "0" if v is None else f"{v / 1e3:.1f}" for v in row) + "\n")
    script = os.path.join(out_dir, "plot.gp")
    columns = ", ".join(
        f"'{data}' using {i + 2}:xtic(1) title columnheader({i + 2})"
        for i in range(len(systems)))
    with open(script, "w") as f:
        f.write("\n".join([
            "set terminal pngcairo size 1400,600 font ',10'",
            f"set output '{png}'",
            "set title 'Peer benchmark: median ops/s (thousands), every put durable, "
            "store in /dev/shm'",
            "set termoption noenhanced",
            "set style data histograms",
            "set style histogram clustered gap 1",
            "set style fill solid 0.8 border -1",
            "set boxwidth 0.9",
            "set key top left",
            "set grid ytics",
            "set ylabel 'thousand ops/s'",
            "set yrange [0:*]",
            "set xtics rotate by 30 right nomirror",
            f"plot {columns}",
            ""]))
    subprocess.run(["gnuplot", script], check=True)


def fixed_sections(w, reported):
    """The workload, the settings (and `reported`: (system, settings) as the runs printed
    them) and the notes: the same on every page."""
    w(INTRO)
    w("")
    w("## Systems and their settings")
    w("")
    w(SETTINGS)
    w("")
    reported_settings(w, reported)
    w(NOTES)
    w("")


MIB = re.compile(r"(\d+) MiB")


def merge_sizes(texts):
    """One system's settings texts, those that differ only in their MiB figures (a pool or
    map sized per workload) merged into one that lists each figure's values: "pool 308 or
    552 MiB"."""
    groups = {}
    for text in texts:
        groups.setdefault(MIB.sub("{} MiB", text.replace("{", "{{").replace("}", "}}")),
                          []).append([int(v) for v in MIB.findall(text)])
    merged = []
    for template, figures in groups.items():
        values = [" or ".join(str(v) for v in sorted(set(column))) for column in zip(*figures)]
        merged.append(template.format(*values))
    return sorted(merged)


def reported_settings(w, reported):
    """The settings each system printed in the runs: (system, settings) pairs."""
    if reported:
        w("As each system reported its settings in these runs:")
        w("")
        for label, text in reported:
            w(f"- {label}: {text}")
        w("")


def weak_section(w, every, reported):
    """The heading, settings and notes of "Writes not synced on return" (the table follows);
    `reported`: (system, settings) as the weak runs printed them."""
    w("## Writes not synced on return")
    w("")
    w(WEAK_INTRO.format(every=every))
    w("")
    reported_settings(w, reported)


def percent(v):
    return "0" if v == 0 else f"{100 * v:.3g}%"


def transactions_section(w, every, reported, points, ops, abort_rate):
    """"Transactions": the systems, the reported settings, ops/s with ratios and the abort
    rates; `points`: (mode label, threads)."""
    w("## Transactions")
    w("")
    w(TXN_INTRO.format(every=every))
    w("")
    reported_settings(w, reported)
    header = "| commits | threads | " + " | ".join(label for _, label in TXN_SYSTEMS) + " |"
    rule = "|---|---:|" + "---:|" * len(TXN_SYSTEMS)
    w("### Transfer throughput (committed transactions/s)")
    w("")
    w("Medians over the runs; in parentheses, for each peer: FlintKV's figure divided by the "
      "peer's (above 1: FlintKV is faster).")
    w("")
    w(header)
    w(rule)
    for mode, t in points:
        flintkv = ops(mode, t, "flintkv")
        cells = [si(flintkv) if s == "flintkv" else cell(ops(mode, t, s), flintkv, si)
                 for s, _ in TXN_SYSTEMS]
        w(f"| {mode} | {t} | " + " | ".join(cells) + " |")
    w("")
    w("### Abort rate")
    w("")
    w("Aborted attempts over all attempts (median over the runs).")
    w("")
    w(header)
    w(rule)
    for mode, t in points:
        cells = []
        for s, _ in TXN_SYSTEMS:
            v = abort_rate(mode, t, s)
            cells.append("–" if v is None else percent(v))
        w(f"| {mode} | {t} | " + " | ".join(cells) + " |")
    w("")


def write_page(report, lines):
    with open(report, "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")


def placeholder(report):
    lines = []
    w = lines.append
    w("# FlintKV beside RocksDB, LevelDB and LMDB")
    w("")
    w("**No figures yet.** This page is written by the peer benchmark; regenerate it on a "
      "quiet machine (as root, so that the peers' Debian packages and gnuplot can be "
      "installed):")
    w("")
    w("    bench/peers/run.sh                    # 1M keys, 1 and 2 threads, 3 runs each")
    w("")
    w("It then shows the machine and its load, the settings each run reported, the medians "
      "of ops/s, bytes per live key and peak resident memory with their ratios to FlintKV, "
      "the plot `docs/peers.png`, the writing workloads again with puts not synced on "
      "return, and transactions (transfer) beside RocksDB's optimistic and pessimistic "
      "transaction databases and LMDB, with abort rates. `RUNS=1 NUM=20000 "
      "bench/peers/run.sh` checks in a minute that everything runs (its figures mean "
      "nothing).")
    w("")
    fixed_sections(w, [])
    w("## Figures")
    w("")
    w("| workload | threads | FlintKV | RocksDB | LevelDB | LMDB |")
    w("|---|---:|---:|---:|---:|---:|")
    for bench in BENCHMARKS:
        for t in (1, 2):
            w(f"| {bench} | {t} | – | – | – | – |")
    w("")
    weak_section(w, 1000, [])
    w("| workload | threads | FlintKV | RocksDB | LevelDB | LMDB |")
    w("|---|---:|---:|---:|---:|---:|")
    for bench in WEAK_BENCHMARKS:
        for t in (1, 2):
            w(f"| {bench} | {t} | – | – | – | – |")
    w("")
    transactions_section(w, 1000, [], [(mode, t) for mode in ("durable", "weak")
                                       for t in (1, 2)],
                         lambda *_: None, lambda *_: None)
    write_page(report, lines)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--placeholder":
        placeholder(sys.argv[2])
        return
    out_dir, report, png, command = sys.argv[1:5]
    results = load(out_dir)
    if not results:
        sys.exit(f"no results in {out_dir}")
    by_point = {}  # (benchmark, threads, system) -> [result], every put durable on return
    weak_point = {}  # the same, runs with weak puts ("sync": false)
    txn_point = {}  # ("durable" or "weak", threads, system) -> [result], transfer runs
    for r in results:
        durable = r.get("sync", True)
        if r["benchmark"] == "transfer":
            txn_point.setdefault(("durable" if durable else "weak", r["threads"], r["system"]),
                                 []).append(r)
            continue
        into = by_point if durable else weak_point
        into.setdefault((r["benchmark"], r["threads"], r["system"]), []).append(r)
    systems = [(s, label) for s, label in SYSTEMS
               if any(k[2] == s for k in list(by_point) + list(weak_point))]
    threads = sorted({r["threads"] for r in results})
    points = [(b, t) for t in threads for b in BENCHMARKS
              if any((b, t, s) in by_point for s, _ in systems)]
    weak_points = [(b, t) for t in threads for b in WEAK_BENCHMARKS
                   if any((b, t, s) in weak_point for s, _ in systems)]
    txn_points = [(mode, t) for mode in ("durable", "weak") for t in threads
                  if any(k[:2] == (mode, t) for k in txn_point)]
    runs = sorted({r["run"] for r in results})

    def metric(field, scale=1.0, where=by_point):
        def get(bench, t, system):
            v = median([r.get(field) for r in where.get((bench, t, system), [])])
            return None if v is None else v * scale
        return get

    ops = metric("ops_per_sec")
    weak_ops = metric("ops_per_sec", where=weak_point)
    first = results[0]
    lines = []
    w = lines.append
    w("# FlintKV beside RocksDB, LevelDB and LMDB")
    w("")
    w(f"Generated by `{command}`: {len(runs)} run(s) of every system x workload x thread "
      f"count, each a fresh process and a fresh store in /dev/shm, the systems alternating run "
      f"by run; every figure is the median over the runs. {first['num']:,} keys of "
      f"{first['key_size']} bytes, {first['value_size']}-byte values. Machine: "
      f"{len(os.sched_getaffinity(0))} CPUs available (nproc), {cpu_model()}; load average "
      f"{load_average(read_text(os.path.join(out_dir, 'uptime-before')))} before and "
      f"{load_average(read_text(os.path.join(out_dir, 'uptime-after')))} after.")
    w("")
    def reported(where, among=None):
        return [(label, text) for s, label in among or systems
                for text in merge_sizes({r["settings"] for k, rs in where.items() if k[2] == s
                                         for r in rs})]

    fixed_sections(w, reported(by_point))
    w("## Figures")
    w("")
    if points or weak_points:
        w("Medians over the runs. In parentheses, for each peer: FlintKV's figure divided by "
          "the peer's (for ops/s above 1 means FlintKV is faster; for bytes and memory above 1 "
          "means FlintKV uses more).")
        w("")
    if points:
        table(w, "Throughput (ops/s), every put durable on return",
              "![ops/s per workload and system](peers.png)", points, systems, ops, si)
        table(w, "Store bytes per live key", "After the workload, the store settled (see above for what is "
              "counted).", points, systems, metric("bytes_per_key"), lambda v: f"{v:.0f}")
        table(w, "Peak resident memory (MiB)", "getrusage's ru_maxrss of the whole process, "
              "the fill included: FlintKV's pool pages too.", points, systems,
              metric("peak_rss_bytes", 1 / 2**20), lambda v: f"{v:.0f}")
        if any(r.get("peak_dram_bytes") is not None for rs in by_point.values() for r in rs):
            table(w, "Peak DRAM (MiB)", "The same, but for FlintKV without its pool's pages "
                  "(the pool stands for persistent memory; sampled every 5 ms, see above).",
                  points, systems, metric("peak_dram_bytes", 1 / 2**20), lambda v: f"{v:.0f}")
    elif weak_points:
        w("No run with every put durable on return (`SYNC=1` was not among the modes run): "
          "only the weak puts below, and no plot.")
        w("")
    else:
        w("Only transfer was run: its figures are in \"Transactions\" below.")
        w("")
    rww = [(t, s, median([r.get("writer_puts") for r in by_point[("readwhilewriting", t, s)]]))
           for t in threads for s, _ in systems if ("readwhilewriting", t, s) in by_point]
    if rww:
        w("readwhilewriting, the writer's puts while the readers ran (median): " +
          "; ".join(f"{dict(SYSTEMS)[s]} {t} thr {v:,.0f}" for t, s, v in rww if v is not None)
          + ".")
        w("")
    if weak_points:
        everies = sorted({r.get("persist_every") for rs in weak_point.values() for r in rs},
                         key=str)
        weak_section(w, everies[0] if len(everies) == 1 else " or ".join(map(str, everies)),
                     reported(weak_point))
        table(w, "Throughput with weak puts (ops/s)", "In parentheses, for each peer: FlintKV's "
              "figure in this mode divided by the peer's in this mode.", weak_points, systems,
              weak_ops, si)
        own = [(b, t, weak_ops(b, t, "flintkv"), ops(b, t, "flintkv")) for b, t in weak_points]
        own = [f"{b} {t} thr {weak / sync:.2f}" for b, t, weak, sync in own
               if weak is not None and sync]
        if own:
            w("FlintKV with weak puts against its own puts durable on return (ops/s ratio, "
              "medians): " + "; ".join(own) + ".")
            w("")
        rww = [(t, s, median([r.get("writer_puts")
                              for r in weak_point[("readwhilewriting", t, s)]]))
               for t in threads for s, _ in systems if ("readwhilewriting", t, s) in weak_point]
        if rww:
            w("readwhilewriting with weak puts, the writer's puts while the readers ran "
              "(median): " + "; ".join(f"{dict(SYSTEMS)[s]} {t} thr {v:,.0f}"
                                       for t, s, v in rww if v is not None) + ".")
            w("")
    if txn_points:
        everies = sorted({r.get("persist_every") for k, rs in txn_point.items()
                          if k[0] == "weak" for r in rs}, key=str)
        transactions_section(
            w, everies[0] if len(everies) == 1 else " or ".join(map(str, everies)) or 1000,
            reported(txn_point, TXN_SYSTEMS), txn_points,
            metric("ops_per_sec", where=txn_point), metric("abort_rate", where=txn_point))
    write_page(report, lines)
    if points:
        plot(points, systems, ops, out_dir, png)


if __name__ == "__main__":
    main()
