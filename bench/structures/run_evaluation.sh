#!/usr/bin/env bash
# The FliT evaluation (paper, section 6) on this machine: builds (as scripts/run does), runs
# structures_bench over every point once, the headline points three times, and writes
# docs/structures-evaluation.md (tables) and docs/structures-evaluation.png (plot).
#
#   bench/structures/run_evaluation.sh            # MIN_TIME=0.2 seconds per point
#   MIN_TIME=1 HEADLINE_REPETITIONS=5 bench/structures/run_evaluation.sh
#
# Plots need gnuplot (Debian: gnuplot-nox), installed here when run as root, so that the
# main build does not depend on it. The raw JSON stays in $BUILD_DIR/structures-evaluation/.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"

min_time=${MIN_TIME:-0.2}
repetitions=${HEADLINE_REPETITIONS:-3}

if ! command -v gnuplot >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "Installing: gnuplot-nox"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null; }
  else
    echo "gnuplot is missing. Run as root: apt-get update && apt-get install -y gnuplot-nox" >&2
    exit 1
  fi
fi

bench="$build_dir/bench/structures_bench"
out="$build_dir/structures-evaluation"
mkdir -p "$out"

echo "== every point (${min_time}s each)"
"$bench" --benchmark_min_time="$min_time" --benchmark_out="$out/all.json" \
  --benchmark_out_format=json

echo "== headline points (${repetitions} repetitions)"
"$bench" --benchmark_min_time="$min_time" --benchmark_repetitions="$repetitions" \
  --benchmark_report_aggregates_only=true \
  --benchmark_filter='^skiplist/(original|automatic|traversal|manual)/[a-z_]+/keys:10000/updates:(5|50)/real_time/threads:1$' \
  --benchmark_out="$out/headline.json" --benchmark_out_format=json

command="bench/structures/run_evaluation.sh"
[ "$min_time" != 0.2 ] && command="MIN_TIME=$min_time $command"
[ "$repetitions" != 3 ] && command="HEADLINE_REPETITIONS=$repetitions $command"
python3 "$top/bench/structures/evaluation_report.py" "$out/all.json" "$out/headline.json" \
  "$top/docs/structures-evaluation.md" "$top/docs/structures-evaluation.png" "$command"
echo "wrote docs/structures-evaluation.md and docs/structures-evaluation.png"
