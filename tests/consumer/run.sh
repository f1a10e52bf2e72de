#!/usr/bin/env bash
# Builds and runs outside projects against this build of flint, the ways a user builds them
# (docs/using-flint.md). Registered as the test `consumer` (tests/consumer/meson.build).
#
#   run.sh SOURCE_ROOT BUILD_ROOT
#
# 1. `meson install --destdir` of BUILD_ROOT into a staging tree; checks that the engine's
#    internal headers are not in it and that one translation unit including every public
#    header compiles with nothing but pkg-config's flags for the installed tree.
# 2. app/ built with a bare compiler line from `pkg-config --cflags --libs flintkv flit`.
# 3. app/ as a CMake project (app/CMakeLists.txt, pkg_check_modules).
# 4. app/ as a Meson project finding flint through pkg-config (PKG_CONFIG_PATH only).
# 5. app/ as a Meson project with flint as a subproject (app/subprojects/flint.wrap, with
#    subprojects/flint linked to SOURCE_ROOT); checks that none of flint's tests come along
#    by default and that no crash-long test does when they are enabled.
# 6. c/ if present: a C program on flintkv/c.h. With a meson.build, a Meson project against
#    the installed tree; otherwise each *.c, compiled by the C compiler with
#    `pkg-config --cflags --libs flintkv-c`, run with a directory for its pools as argument.
# 7. examples/*/ of SOURCE_ROOT that have a meson.build: each built against the installed
#    tree (pkg-config) and its `meson test` run.
# The work tree is BUILD_ROOT/consumer-work (a fixed place, so that ccache finds its earlier
# compilations), emptied at the start and kept afterwards for a look at what failed.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 SOURCE_ROOT BUILD_ROOT" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
meson=${MESON:-meson}
cxx=${CXX:-c++}
cc=${CC:-cc}
work=$build/consumer-work
rm -rf "$work"
mkdir -p "$work"
# The consumer builds: no optimisation (compile time is all that matters here).
setup_args=(-Dbuildtype=debug -Ddebug=false)

step() { echo; echo "== consumer: $*"; }
fail() { echo "consumer: FAILED: $*" >&2; exit 1; }

# --- 1. the installed tree ---
step "meson install --destdir $work/stage"
"$meson" install -C "$build" --no-rebuild --destdir "$work/stage" >"$work/install.log" ||
  { cat "$work/install.log"; fail "meson install"; }
pc=$(find "$work/stage" -name flintkv.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || fail "no flintkv.pc installed"
pcdir=$(dirname "$pc")
layers=(pv_interface flit allocators flintkv)
# The crash harness is a layer once crashtest/ is in the tree.
[ -d "$src/crashtest" ] && layers+=(crashtest)
for name in "${layers[@]}"; do
  [ -f "$pcdir/$name.pc" ] || fail "no $name.pc installed in $pcdir"
done
# The .pc files find the tree from their own place (pkgconfig.relocatable, a default option
# of ours). A build directory configured before that default existed writes an absolute
# prefix: then the test reads copies of them with the prefix moved into the staging tree.
if ! grep -q '^prefix=${pcfiledir}' "$pc"; then
  echo "note: $build writes .pc files with an absolute prefix" \
       "(meson configure $build -Dpkgconfig.relocatable=true makes them relocatable)"
  mkdir -p "$work/pc"
  for f in "$pcdir"/*.pc; do
    sed "s|^prefix=|prefix=$work/stage|" "$f" >"$work/pc/$(basename "$f")"
  done
  pcdir=$work/pc
fi
export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
incdir=$(pkg-config --variable=includedir flintkv)
for name in "${layers[@]}"; do
  [ -d "$incdir/$name" ] || fail "the headers of $name are not installed ($incdir/$name)"
  lib=$(pkg-config --variable=libdir "$name")/lib$name.a
  [ -f "$lib" ] || fail "the library of $name is not installed ($lib)"
done
[ -f "$incdir/flit/config.hpp" ] || fail "the generated flit/config.hpp is not installed"
if [ -e "$incdir/flintkv/internal" ]; then
  fail "the engine's internal headers are installed ($incdir/flintkv/internal)"
fi
leftovers=$(find "$incdir" -name '*.in' -o -name meson.build)
[ -z "$leftovers" ] || fail "build files installed with the headers: $leftovers"
echo "installed: $(cd "$incdir" && find . -type f | wc -l) headers; .pc files in $pcdir"

step "every public header, with pkg-config's flags only"
all=$work/all_headers.cpp
: >"$all"
while IFS= read -r h; do
  echo "#include <$h>" >>"$all"
done < <(cd "$incdir" && find "${layers[@]}" -name '*.hpp' -not -path '*/internal/*' \
           -not -name gtest.hpp | sort)  # crashtest/gtest.hpp: its user brings GoogleTest
[ -f "$incdir/flintkv/c.h" ] && echo '#include <flintkv/c.h>' >>"$all"
echo 'int main() { return 0; }' >>"$all"
# shellcheck disable=SC2046
"$cxx" -Wall -Wextra -Wpedantic -Werror -fsyntax-only $(pkg-config --cflags "${layers[@]}") \
  "$all" || fail "the public headers do not compile against the installed tree alone"
echo "ok: $(grep -c '#include' "$all") headers"

# --- 2. a bare compiler line ---
step "app/ with $cxx and pkg-config"
mkdir -p "$work/plain"
# shellcheck disable=SC2046
"$cxx" -o "$work/plain/consumer_app" "$src/tests/consumer/app/main.cpp" \
  $(pkg-config --cflags --libs flintkv flit) || fail "the bare compiler line"
"$work/plain/consumer_app" "$work/plain" || fail "app/ built with the bare compiler line"

# --- 3. CMake, installed flint through pkg-config (pkg_check_modules) ---
step "app/ as a CMake project, flint found through pkg_check_modules"
command -v cmake >/dev/null || fail "cmake is not installed (scripts/common.sh installs it)"
cmake -S "$src/tests/consumer/app" -B "$work/app-cmake" -DCMAKE_BUILD_TYPE=Debug \
  >"$work/app-cmake.log" || { cat "$work/app-cmake.log"; fail "cmake configure"; }
cmake --build "$work/app-cmake" >>"$work/app-cmake.log" ||
  { cat "$work/app-cmake.log"; fail "cmake --build"; }
mkdir -p "$work/app-cmake/pool"
"$work/app-cmake/consumer_app" "$work/app-cmake/pool" || fail "app/ built with CMake"

# --- 4. Meson, installed flint through pkg-config ---
cp -r "$src/tests/consumer/app" "$work/app"
step "app/ as a Meson project, flint found through pkg-config"
"$meson" setup "$work/app-installed" "$work/app" "${setup_args[@]}" --wrap-mode=nofallback \
  >"$work/app-installed.log" || { cat "$work/app-installed.log"; fail "meson setup (installed)"; }
"$meson" test -C "$work/app-installed" --print-errorlogs || fail "app/ against the installed tree"

# --- 5. Meson, flint as a subproject ---
step "app/ as a Meson project, flint as a subproject"
ln -s "$src" "$work/app/subprojects/flint"
(
  # Nothing installed may be found: the fallback to the subproject is what is tested.
  unset PKG_CONFIG_PATH
  "$meson" setup "$work/app-sub" "$work/app" "${setup_args[@]}" \
    >"$work/app-sub.log" || { cat "$work/app-sub.log"; fail "meson setup (subproject)"; }
  grep -q "Executing subproject flint" "$work/app-sub.log" ||
    fail "flint was not taken as a subproject (see $work/app-sub.log)"
  "$meson" test -C "$work/app-sub" --print-errorlogs || fail "app/ with flint as a subproject"
  tests=$("$meson" introspect "$work/app-sub" --tests |
          python3 -c 'import json, sys; print(" ".join(t["name"] for t in json.load(sys.stdin)))')
  [ "$tests" = consumer_app ] || fail "a parent's meson test holds flint's tests by default: $tests"
  echo "ok: the parent's tests are: $tests"

  step "flint's tests enabled in the parent (-Dflint:tests=true): configured, not built"
  "$meson" setup "$work/app-sub-tests" "$work/app" -Dflint:tests=true >"$work/app-sub-tests.log" ||
    { cat "$work/app-sub-tests.log"; fail "meson setup -Dflint:tests=true"; }
  "$meson" introspect "$work/app-sub-tests" --tests | python3 -c '
import json, sys
tests = json.load(sys.stdin)
flint = [t for t in tests if any(s.startswith("flint:") for s in t["suite"])]
long_ = [t["name"] for t in flint if any(s.endswith(":crash-long") for s in t["suite"])]
if not flint:
    sys.exit("consumer: FAILED: -Dflint:tests=true registered none of the tests of flint")
if long_:
    sys.exit("consumer: FAILED: crash-long tests in the parent: " + " ".join(long_))
print(f"ok: {len(flint)} tests of flint, none in crash-long")
'
)

# --- 6. the C API from C ---
if [ -d "$src/tests/consumer/c" ]; then
  step "c/: the C API from C"
  if [ -f "$src/tests/consumer/c/meson.build" ]; then
    "$meson" setup "$work/c" "$src/tests/consumer/c" "${setup_args[@]}" --wrap-mode=nofallback \
      >"$work/c.log" || { cat "$work/c.log"; fail "meson setup (c/)"; }
    "$meson" test -C "$work/c" --print-errorlogs || fail "c/"
  else
    [ -f "$pcdir/flintkv-c.pc" ] || fail "no flintkv-c.pc installed (is flintkv/c.h missing?)"
    found=0
    for f in "$src"/tests/consumer/c/*.c; do
      [ -f "$f" ] || continue
      found=1
      exe=$work/c/$(basename "$f" .c)
      mkdir -p "$exe.d"
      # shellcheck disable=SC2046
      "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -o "$exe" "$f" \
        $(pkg-config --cflags --libs flintkv-c) || fail "compiling $f as C"
      "$exe" "$exe.d" || fail "$f"
    done
    [ $found = 1 ] || fail "tests/consumer/c/ holds neither a meson.build nor a .c file"
  fi
else
  step "c/: not present (skipped)"
fi

# --- 7. the examples ---
for ex in "$src"/examples/*/; do
  [ -f "$ex/meson.build" ] || continue
  name=$(basename "$ex")
  step "examples/$name against the installed tree"
  # Optimised: an example's test may be a crash campaign, whose run time is what counts.
  "$meson" setup "$work/examples-$name" "$ex" -Dbuildtype=release --wrap-mode=nofallback \
    >"$work/examples-$name.log" || { cat "$work/examples-$name.log"; fail "meson setup (examples/$name)"; }
  "$meson" test -C "$work/examples-$name" --print-errorlogs || fail "examples/$name"
done

echo
echo "consumer: all passed"
