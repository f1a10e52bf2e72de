#!/usr/bin/env python3
"""Turns the structures benchmark's JSON output into docs/structures-evaluation.md and a PNG.

Usage: evaluation_report.py ALL.json HEADLINE.json OUT.md OUT.png COMMAND

ALL.json holds one run of every point; HEADLINE.json the headline points repeated (Google
Benchmark's median aggregates are used). The PNG is drawn with gnuplot (pngcairo).
"""
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from machine import cpu_model  # noqa: E402  (bench/machine.py)

STRUCTURES = ["list", "hash_table", "bst", "skiplist"]
MODES = ["automatic", "traversal", "manual"]
PLACEMENTS = ["hashed", "adjacent", "link_and_persist", "plain", "nonpersistent"]
UPDATES = [0, 5, 50]
THREADS = [1, 2]

# The FliT paper's implementation on this machine class (skiplist, automatic, 10K keys,
# 5% updates, 1 thread), as quoted in the issue; and its flushes per op at 50% updates.
PAPER = {"adjacent": 3.01, "hashed": 2.12, "plain": 0.093, "original": 5.58}
PAPER_PWB_50 = 9.35


def parse(name):
    """'skiplist/manual/adjacent/keys:10000/updates:5/real_time/threads:2[_median]' -> key."""
    parts = name.split("/")
    fields = {}
    for p in parts[3:]:
        if ":" in p:
            k, v = p.split(":", 1)
            fields[k] = int(v.split("_")[0])
    return (parts[0], parts[1], parts[2], fields["keys"], fields["updates"], fields["threads"])


def load(path, aggregate=None):
    with open(path) as f:
        data = json.load(f)
    points = {}
    for b in data["benchmarks"]:
        if aggregate is not None and b.get("aggregate_name") != aggregate:
            continue
        if aggregate is None and b.get("run_type") == "aggregate":
            continue
        points[parse(b["name"])] = {
            "mops": b.get("Mops", 0.0),
            "pwb": b.get("pwb/op", 0.0),
            "pfence": b.get("pfence/op", 0.0),
            "ratio": b.get("vs_original"),
        }
    return data.get("context", {}), points


def configs():
    yield ("original", "atomic")
    for m in MODES:
        for p in PLACEMENTS:
            yield (m, p)


def fmt(x, digits=2):
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits}f}" if x >= 0.01 or x == 0 else f"{x:.3f}"


def key_ranges(points, structure):
    return sorted({k[3] for k in points if k[0] == structure})


def headline(points, head):
    lines = []

    def get(mode, placement, updates=5):
        key = ("skiplist", mode, placement, 10000, updates, 1)
        return head.get(key) or points.get(key)

    orig = get("original", "atomic")
    lines.append("Skiplist, 10K keys, 5% updates, 1 thread, in Mop/s (median of the repetitions); "
                 "the paper's figures are its automatic mode on this machine class:")
    lines.append("")
    lines.append("| counters | paper, automatic | ours, automatic | ours, traversal | ours, manual |")
    lines.append("| --- | ---: | ---: | ---: | ---: |")
    for label, placement, paper in [
        ("adjacent", "adjacent", PAPER["adjacent"]),
        ("hashed, 1 MiB table", "hashed", PAPER["hashed"]),
        ("plain (every p-load flushes)", "plain", PAPER["plain"]),
    ]:
        cells = []
        for mode in MODES:
            p = get(mode, placement)
            if p is None:
                cells.append("–")
                continue
            ratio = p["mops"] / orig["mops"] if orig and orig["mops"] else None
            cells.append(f"{fmt(p['mops'])} ({fmt(ratio)}× original)")
        lines.append(f"| {label} | {paper} | " + " | ".join(cells) + " |")
    if orig:
        lines.append(f"| original (volatile, plain atomics) | {PAPER['original']} | {fmt(orig['mops'])} | | |")
    lines.append("")
    lines.append("Write-backs and fences per operation at 50% updates (same skiplist, 1 thread); the "
                 "paper's automatic skiplist gave every node 64 levels:")
    lines.append("")
    lines.append("| | pwb/op | pfence/op | Mop/s |")
    lines.append("| --- | ---: | ---: | ---: |")
    lines.append(f"| paper, automatic | {PAPER_PWB_50} | – | – |")
    for mode in MODES:
        for placement in ["adjacent", "hashed"]:
            p = get(mode, placement, 50)
            if p is None:
                continue
            lines.append(f"| ours, {mode}, {placement} | {fmt(p['pwb'])} | {fmt(p['pfence'])} | {fmt(p['mops'])} |")
    return lines


def tables(points):
    lines = []
    for s in STRUCTURES:
        for keys in key_ranges(points, s):
            lines.append(f"### {s}, {keys:,} keys".replace(",000", " 000"))
            lines.append("")
            lines.append("Throughput in Mop/s (and the ratio to `original` measured in the same run):")
            lines.append("")
            head = "| mode / placement | " + " | ".join(f"{u}% upd, {t} thr" for u in UPDATES for t in THREADS) + " |"
            lines.append(head)
            lines.append("| --- |" + " ---: |" * (len(UPDATES) * len(THREADS)))
            for m, p in configs():
                cells = []
                for u in UPDATES:
                    for t in THREADS:
                        r = points.get((s, m, p, keys, u, t))
                        if r is None:
                            cells.append("–")
                        elif m == "original":
                            cells.append(fmt(r["mops"]))
                        else:
                            cells.append(f"{fmt(r['mops'])} ({fmt(r['ratio'])}×)")
                lines.append(f"| {m} / {p} | " + " | ".join(cells) + " |")
            lines.append("")
            lines.append("Write-backs and fences per operation (pwb / pfence):")
            lines.append("")
            lines.append(head)
            lines.append("| --- |" + " ---: |" * (len(UPDATES) * len(THREADS)))
            for m, p in configs():
                if m == "original":
                    continue
                cells = []
                for u in UPDATES:
                    for t in THREADS:
                        r = points.get((s, m, p, keys, u, t))
                        cells.append("–" if r is None else f"{fmt(r['pwb'])} / {fmt(r['pfence'])}")
                lines.append(f"| {m} / {p} | " + " | ".join(cells) + " |")
            lines.append("")
    return lines


def plot(points, png):
    """Top row: Mop/s at 5% updates, 1 thread, the smaller key range, with the original as a
    dashed line. Bottom row: pwb/op at 50% updates, 1 thread. Both on log scales."""
    tmp = tempfile.mkdtemp(prefix="structures-plot-")
    script = [
        "set terminal pngcairo size 1800,900 font ',10'",
        f"set output '{png}'",
        "set multiplot layout 2,4 title 'FliT evaluation on this machine: 1 thread, smaller key range (list 128, others 10K)'",
        "set style data histograms",
        "set style histogram clustered gap 1",
        "set style fill solid 0.85 border -1",
        "set boxwidth 0.9",
        "set termoption noenhanced",
        "set key below horizontal font ',8'",
        "set xrange [-0.6:2.6]",
        "set xtics nomirror",
        "set grid ytics",
    ]
    for row, (updates, metric, ylabel, log) in enumerate(
        [(5, "mops", "Mop/s (5% updates)", True), (50, "pwb", "pwb/op (50% updates)", True)]):
        for s in STRUCTURES:
            ks = key_ranges(points, s)
            if not ks:
                continue
            keys = ks[0]
            path = os.path.join(tmp, f"{s}-{metric}.dat")
            with open(path, "w") as f:
                for m in MODES:
                    vals = []
                    for p in PLACEMENTS:
                        r = points.get((s, m, p, keys, updates, 1))
                        v = r[metric] if r else 0
                        vals.append(f"{max(v, 1e-3) if log else v:.4f}")
                    f.write(m + " " + " ".join(vals) + "\n")
            orig = points.get((s, "original", "atomic", keys, updates, 1))
            script.append(f"set title '{s}, {keys} keys'")
            script.append(f"set ylabel '{ylabel}'")
            script.append("set logscale y" if log else "unset logscale y")
            script.append("set yrange [0.01:*]" if log else "set yrange [0:*]")
            cols = ", ".join(f"'{path}' using {i + 2}:xtic(1) title '{p}'" if i == 0 else
                             f"'' using {i + 2} title '{p}'" for i, p in enumerate(PLACEMENTS))
            if metric == "mops" and orig:
                cols += f", {orig['mops']:.4f} with lines lw 2 dt 2 lc rgb 'black' title 'original'"
            script.append("plot " + cols)
    script.append("unset multiplot")
    gp = os.path.join(tmp, "plot.gp")
    with open(gp, "w") as f:
        f.write("\n".join(script) + "\n")
    subprocess.run(["gnuplot", gp], check=True)


def main():
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    all_json, head_json, out_md, out_png, command = sys.argv[1:]
    context, points = load(all_json)
    caches = {c.get("level"): c.get("size", 0) for c in context.get("caches", []) if c.get("type") != "Instruction"}
    l2 = caches.get(2, 0) // 1024
    l3 = caches.get(3, 0) // (1024 * 1024)
    load_avg = ", ".join(f"{x:.1f}" for x in context.get("load_avg", [])) or "?"
    _, head = load(head_json, aggregate="median")
    plot(points, out_png)
    lines = [
        "# The FliT evaluation on this machine",
        "",
        "The FliT paper's section 6, reproduced with this project's structures "
        "(see [structures.md](structures.md)): each structure in each durability mode under "
        "each counter placement, plus `plain` (no counters: every p-load writes back) and "
        "`nonpersistent` (no write-back at all), against `original` (plain atomics) measured "
        "in the same run. Keys are uniform in the key range and the structure holds half of "
        "them; updates are half inserts, half removes; the rest are finds.",
        "",
        "Regenerate (builds, installs gnuplot-nox when run as root, runs every point, then the "
        "headline points three times):",
        "",
        "```sh",
        command,
        "```",
        "",
        f"Machine: {cpu_model()}, {context.get('num_cpus', '?')} CPUs at "
        f"{context.get('mhz_per_cpu', '?')} MHz, L2 {l2} KiB, L3 {l3} MiB; run "
        f"{context.get('date', '?')}, load average {load_avg} when it began. Flushes use the "
        "CPU's best instruction (`flit::detected`: clwb, clflushopt or clflush, whichever it "
        "has); nodes live in a pool over DRAM (the emulated NVM), allocated by "
        "`alloc::persistent_allocator` and reclaimed through `alloc::epoch_domain`. Each point ran once for the minimum time given to the script; "
        "the headline points are medians of the repetitions. Throughput is wall-clock: on a "
        "shared machine, points measured minutes apart (a configuration and its `original`) "
        "can differ by tens of percent for reasons that are not theirs, and two threads scale "
        "only as far as the other tenants leave a second CPU free.",
        "",
        "## Headline",
        "",
    ]
    lines += headline(points, head)
    lines += [
        "",
        "How to read it: `plain` is what FliT avoids (every p-load writes back); the counter "
        "placements write back only what an unfinished p-store tagged, so at 0% updates they "
        "issue nothing at all and their cost is the counter read (adjacent: same line; hashed: "
        "another line of a 1 MiB table; link_and_persist: a bit of the word). The modes differ "
        "in how many accesses are p-instructions: `automatic` p-loads every word a search "
        "touches, `traversal` only the window at the end, `manual` only the words an outcome "
        "depends on, and it writes the skiplist's index with v-instructions, hence its lower "
        "pwb/op. Nodes sized to their height keep a skiplist insert at one or two lines.",
        "",
        f"![throughput and write-backs per operation]({os.path.basename(out_png)})",
        "",
        "## Every point",
        "",
    ]
    lines += tables(points)
    with open(out_md, "w") as f:
        f.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
