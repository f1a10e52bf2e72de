#!/usr/bin/env bash
# The engine's performance figures on this machine: builds the default configuration (as
# scripts/run does) and the same engine with nonpersistent counters (build-np), then runs
# `flintkv bench` RUNS times per thread count, alternating the two builds so that both see
# the same machine, and writes docs/engine-performance.md (medians, durability overhead,
# recovery) from the JSON each run wrote.
#
#   bench/engine/run_performance.sh               # NUM=1000000 RUNS=3 THREADS="1 2"
#   NUM=100000 RUNS=5 bench/engine/run_performance.sh
#
# The raw JSON stays in $BUILD_DIR/engine-performance/.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"

num=${NUM:-1000000}
runs=${RUNS:-3}
threads=${THREADS:-1 2}
np_dir=${NP_BUILD_DIR:-build-np}

build_in "$np_dir" -Dflit_counters=nonpersistent

out="$build_dir/engine-performance"
rm -rf "$out"
mkdir -p "$out"

cut -d' ' -f1-3 /proc/loadavg > "$out/load-before"
persistent="$build_dir/engine/tools/flintkv"
nonpersistent="$np_dir/engine/tools/flintkv"
random_benchmarks=fillrandom,readrandom,seekrandom,overwrite,transfer
for t in $threads; do
  for r in $(seq 1 "$runs"); do
    echo "== threads $t, run $r of $runs"
    # Random keys: fill, read, scan, overwrite and transfer one store, then reopen it.
    "$persistent" bench --benchmarks="$random_benchmarks,recover" --num="$num" --threads="$t" \
      --json="$out/persistent-random-t$t-r$r.json" | grep -E '^[a-z]+ +:'
    "$nonpersistent" bench --benchmarks="$random_benchmarks" --num="$num" --threads="$t" \
      --json="$out/nonpersistent-random-t$t-r$r.json" | grep -E '^[a-z]+ +:'
    # Weak writes (Persist every 1000 writes of each thread and at its end).
    "$persistent" bench --benchmarks=fillrandom,transfer --sync=0 --num="$num" --threads="$t" \
      --json="$out/persistent-weak-t$t-r$r.json" | grep -E '^[a-z]+ +:'
    # Exactly NUM distinct keys: fillseq, then reopen.
    "$persistent" bench --benchmarks=fillseq,recover --num="$num" --threads="$t" \
      --json="$out/persistent-seq-t$t-r$r.json" | grep -E '^[a-z]+ +:'
  done
done

cut -d' ' -f1-3 /proc/loadavg > "$out/load-after"

command="bench/engine/run_performance.sh"
[ "$num" != 1000000 ] && command="NUM=$num $command"
[ "$runs" != 3 ] && command="RUNS=$runs $command"
[ "$threads" != "1 2" ] && command="THREADS=\"$threads\" $command"
python3 "$top/bench/engine/performance_report.py" "$out" "$top/docs/engine-performance.md" \
  "$command"
echo "wrote docs/engine-performance.md"
