#!/usr/bin/env bash
# Fuzz both twins with coverage from the compiled extension too: build an instrumented copy of
# the extension with clang (into fuzz/build, away from the installed one) and run atheris on it.
#   bash fuzz/run.sh [seconds] [target]     (default 600 seconds; target: accumulator, toolset or records)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
target=${2:-accumulator}
python=${PYTHON:-python}
case "$target" in
  accumulator) corpus=fuzz/corpus; seeds=fuzz/seeds ;;
  toolset|records) corpus=fuzz/corpus-$target; seeds= ;;
  *) echo "unknown target $target: accumulator, toolset or records" >&2; exit 2 ;;
esac
build=fuzz/build
rm -rf "$build" && mkdir -p "$build"
cp -r pyproject.toml setup.py README.md src "$build/"
rm -f "$build"/src/callstitch/*.so "$build"/src/callstitch/_accumulator_c.c "$build"/src/callstitch/_slots.c
# Coverage counters and comparison hooks for libFuzzer (atheris carries the runtime).
(cd "$build" && CC=clang LDSHARED="clang -shared" \
  CFLAGS="-fsanitize-coverage=inline-8bit-counters,pc-table,trace-cmp -g -O1" \
  "$python" setup.py build_ext --inplace -q)
# libFuzzer itself, as a shared library loaded first, so the extension's counters and atheris's
# Python coverage report to one engine (clang ships it as an archive: wrap it).
archive=$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a | head -n 1)
clang -shared -fPIC -o "$build/libfuzzer.so" -Wl,--whole-archive "$archive" -Wl,--no-whole-archive -lstdc++ -lpthread
mkdir -p "$corpus" fuzz/crashes
LD_PRELOAD="$build/libfuzzer.so" PYTHONPATH="$build/src" "$python" "fuzz/fuzz_$target.py" "$corpus" $seeds \
  -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix=fuzz/crashes/ -timeout=20 -rss_limit_mb=2048
