# Shared by scripts/run and scripts/test: install what is missing, configure, build.
# Sourced, not run. Honours BUILD_DIR (default: build) and MESON_ARGS (extra setup options
# for that build).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
build_dir=${BUILD_DIR:-build}

# Debian 12 packages the project builds with (cmake: tests/consumer builds a CMake project
# against the installed tree; ccache: a clean clone, CI's, reuses what an earlier build
# compiled, below), and those a script that sources this file adds in extra_packages
# (bench/peers/run.sh: the peer stores and gnuplot).
packages=(g++ meson ninja-build pkg-config cmake python3 libpmem2-dev libboost-dev googletest
          libgtest-dev libgmock-dev libbenchmark-dev ccache
          ${extra_packages[@]+"${extra_packages[@]}"})

missing_packages() {
  local p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}

install_packages() {
  local missing
  missing=$(missing_packages | tr '\n' ' ')
  [ -z "${missing// /}" ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    echo "Installing: $missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
  else
    echo "Missing Debian packages. Run as root:" >&2
    echo "  apt-get update && apt-get install -y $missing" >&2
    exit 1
  fi
}

# Meson compiles through ccache when it is installed. Compile lines name sources relative to
# the build directory, so a clone elsewhere (CI's) can reuse what another clone compiled; only
# the sanitizer build's line tables (-g1) would make ccache hash the directory too. The cost:
# such an object's debug info names the directory that compiled it first.
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}

# build_in DIR [meson setup options...]: configures DIR (or, if it exists, sets the given
# options again, so that a build directory follows the scripts), then builds what changed.
build_in() {
  local dir=$1
  shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >/dev/null
  elif [ $# -gt 0 ]; then
    meson configure "$dir" "$@" >/dev/null
  fi
  ninja -C "$dir" >/dev/null || ninja -C "$dir"
}

install_packages
# A script that builds only its own targets sets build_own_targets=1 before sourcing this.
if [ -z "${build_own_targets:-}" ]; then
  # shellcheck disable=SC2086
  build_in "$build_dir" ${MESON_ARGS:-}
fi
