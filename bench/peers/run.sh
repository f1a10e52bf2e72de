#!/usr/bin/env bash
# The peer benchmark: FlintKV beside RocksDB, LevelDB and LMDB (Debian's packages) on this
# machine, and beside RocksDB's two transaction databases on transfer. Installs what is
# missing (as scripts/run does, with the peers' libraries and gnuplot), builds the driver
# (configured only where the libraries are found), runs every system x workload x thread
# count x durability mode RUNS times, each run a fresh process and a fresh store in
# /dev/shm, the systems alternating run by run (each run starts with the next system), and
# writes docs/peers.md (machine, settings, medians, ratios to FlintKV) and docs/peers.png
# from the JSON lines the runs printed.
#
#   bench/peers/run.sh                        # NUM=1000000 RUNS=3 THREADS="1 2" SYNC="1 0"
#   RUNS=1 NUM=20000 bench/peers/run.sh       # a quick check that everything runs
#
# SYNC lists the durability modes: 1, every put durable on return; 0, weak puts made
# durable by each thread's persist after every PERSIST_EVERY (default 1000) of its puts and
# at its end (flintkv_peers --sync=0 --persist_every=N). Mode 0 runs only the workloads
# that write (fillrandom, overwrite, readwhilewriting, transfer), those of BENCHMARKS.
# transfer (a transaction per op: read two random keys, write both) runs on the systems with
# transactions only: flintkv, rocksdb-occ (RocksDB's OptimisticTransactionDB), rocksdb-2pl
# (its pessimistic TransactionDB) and lmdb; rocksdb-occ and rocksdb-2pl run nothing else.
# Only the transactional comparison (docs/peers.md then has only its section):
#
#   BENCHMARKS=transfer SYSTEMS="flintkv rocksdb-occ rocksdb-2pl lmdb" SYNC=1 bench/peers/run.sh
#
# Also: VALUE_SIZE (default 64), BENCHMARKS, SYSTEMS (default: all), BUILD_DIR (default
# build). Run it on a quiet machine. The raw results stay in $BUILD_DIR/peers/results.jsonl.
extra_packages=(librocksdb-dev libleveldb-dev liblmdb-dev gnuplot-nox)
build_own_targets=1  # only the driver and what it links
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"

num=${NUM:-1000000}
runs=${RUNS:-3}
threads=${THREADS:-1 2}
value_size=${VALUE_SIZE:-64}
benchmarks=${BENCHMARKS:-fillrandom readrandom seekrandom overwrite readwhilewriting transfer}
syncs=${SYNC:-1 0}
persist_every=${PERSIST_EVERY:-1000}
for y in $syncs; do
  if [ "$y" != 1 ] && [ "$y" != 0 ]; then
    echo "bench/peers: SYNC lists 1 and/or 0, not '$y'" >&2
    exit 2
  fi
done
# The workloads whose timed part writes: the only ones run with weak puts.
writes() {
  case $1 in fillrandom | overwrite | readwhilewriting | transfer) return 0 ;; esac
  return 1
}
# Whether system $1 runs workload $2: transfer needs transactions, and RocksDB's transaction
# databases run only transfer (their other workloads would be plain RocksDB's).
runs_on() {
  case $2 in
    transfer) case $1 in flintkv | rocksdb-occ | rocksdb-2pl | lmdb) return 0 ;; esac ;;
    *) case $1 in rocksdb-occ | rocksdb-2pl) ;; *) return 0 ;; esac ;;
  esac
  return 1
}
read -r -a systems <<< "${SYSTEMS:-flintkv rocksdb rocksdb-occ rocksdb-2pl leveldb lmdb}"

driver="$build_dir/bench/peers/flintkv_peers"
if [ ! -f "$build_dir/build.ninja" ]; then
  # shellcheck disable=SC2086
  meson setup "$build_dir" ${MESON_ARGS:-} >/dev/null
fi
# grep reads every line (no -q): under pipefail, ninja must not die of a closed pipe.
configured() {
  ninja -C "$build_dir" -t targets all | grep '^bench/peers/flintkv_peers:' >/dev/null
}
if ! configured; then
  # Configured before the libraries were installed: meson keeps the header checks that
  # failed then, and only a wipe (same options) forgets them. Later builds of the rest of
  # the tree recompile it (ccache makes that quick).
  echo "bench/peers: reconfiguring $build_dir from scratch (the peers' libraries are new)"
  meson setup --wipe "$build_dir" >/dev/null
  if ! configured; then
    echo "bench/peers: the driver is not configured in $build_dir (is -Dbenchmarks=false?)" >&2
    exit 1
  fi
fi
ninja -C "$build_dir" bench/peers/flintkv_peers >/dev/null

out="$build_dir/peers"
rm -rf "$out"
mkdir -p "$out"
store="/dev/shm/flintkv-peers-run-$$"  # each run's store; the driver removes it at exit
trap 'rm -rf "$store"' EXIT

uptime > "$out/uptime-before"
for r in $(seq 1 "$runs"); do
  for t in $threads; do
    for y in $syncs; do
      for b in $benchmarks; do
        [ "$y" = 1 ] || writes "$b" || continue
        for i in "${!systems[@]}"; do
          s=${systems[$(( (i + r - 1) % ${#systems[@]} ))]}
          runs_on "$s" "$b" || continue
          line=$("$driver" --system="$s" --benchmark="$b" --threads="$t" --num="$num" \
                   --value_size="$value_size" --sync="$y" --persist_every="$persist_every" \
                   --db="$store")
          echo "{\"run\": $r, ${line#\{}" >> "$out/results.jsonl"
          ops=$(sed -E 's/.*"ops_per_sec": ([^,]+),.*/\1/' <<< "$line")
          aborts=""
          if [ "$b" = transfer ]; then
            aborts=$(sed -E 's/.*"aborts": ([0-9]+),.*/ (\1 aborts)/' <<< "$line")
          fi
          printf '== run %s of %s: %-16s %s thr sync=%s %-11s %12.0f ops/s%s\n' "$r" "$runs" \
            "$b" "$t" "$y" "$s" "$ops" "$aborts"
        done
      done
    done
  done
done
uptime > "$out/uptime-after"

command="bench/peers/run.sh"
[ -n "${SYSTEMS:-}" ] && command="SYSTEMS=\"$SYSTEMS\" $command"
[ -n "${BENCHMARKS:-}" ] && command="BENCHMARKS=\"$BENCHMARKS\" $command"
[ "$persist_every" != 1000 ] && command="PERSIST_EVERY=$persist_every $command"
[ "$syncs" != "1 0" ] && command="SYNC=\"$syncs\" $command"
[ "$value_size" != 64 ] && command="VALUE_SIZE=$value_size $command"
[ "$threads" != "1 2" ] && command="THREADS=\"$threads\" $command"
[ "$runs" != 3 ] && command="RUNS=$runs $command"
[ "$num" != 1000000 ] && command="NUM=$num $command"
python3 "$top/bench/peers/report.py" "$out" "$top/docs/peers.md" "$top/docs/peers.png" \
  "$command"
echo "wrote docs/peers.md and docs/peers.png"
