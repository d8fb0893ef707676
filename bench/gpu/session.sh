#!/usr/bin/env bash
# Everything one short GPU booking should do, in one call from the checkout root on the GPU
# machine (README, "The GPU worker"): build the CUDA variant (.gpu/build.sh, carried from the
# CPU machine with ../shared/gpu/fetch-debs.sh) with only the targets the tests and the
# bench need, run every gpu-labelled test and the loader binding test, record how the worker
# was linked, then the A/B rounds of bench/gpu/run.sh, and print one table of it all.
# Within 8 minutes on an H100 or H200 (HEADROOM_GPU_SESSION_S, default 470 s): build ~2 min,
# tests ~1-2 min, the bench what is left; torch.compile rounds only where time is left for
# them (HEADROOM_GPU_SESSION_COMPILE_S, default 240 s, at the bench's start).
#   bash bench/gpu/session.sh [OUT_DIR]     (OUT_DIR default $OUT, else /tmp/gpu-session)
# HEADROOM_GPU_SESSION_SUITE=1 builds everything instead and runs the whole suite (ctest -j,
# suite.log) before the GPU tests; the bench gets what time is left (a booking of its own).
# Every stage runs even if an earlier one fails; the exit status is the first failure's.
# Logs: OUT_DIR/{build,ctest,link,bench}.log; the table: OUT_DIR/summary.txt.
set -u
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-${OUT:-/tmp/gpu-session}}
mkdir -p "$OUT_DIR"
status=0
note() { echo "== $* ($(date -u +%H:%M:%S))"; }
fail() { [ "$status" -ne 0 ] || status=$1; }

[ -f .gpu/build.sh ] || { echo "no .gpu/build.sh: run ../shared/gpu/fetch-debs.sh .gpu on the CPU machine and carry .gpu" >&2; exit 2; }
# Stages are cut off so that what ran comes back within one call (HEADROOM_GPU_SESSION_S,
# default 470 s): the bench gets whatever time the build and the tests left.
DEADLINE=$((SECONDS + ${HEADROOM_GPU_SESSION_S:-470}))
left() { echo $((DEADLINE - SECONDS > 10 ? DEADLINE - SECONDS : 10)); }
SUITE=${HEADROOM_GPU_SESSION_SUITE:-0}
TARGETS="headroom-worker headroom hf_grpo_bench grpo_step_bench worker_comm_nccl_test worker_loader_binding_test
  $(ls tests/gpu/*_test.cc | sed 's#.*/\(.*\)\.cc#gpu_\1#')"
[ "$SUITE" = 1 ] && TARGETS=all
note "build"
# shellcheck disable=SC2086
# Graphs ON explicitly: a build directory kept from an earlier call caches the fallback's OFF.
CMAKE_EXTRA=-DHEADROOM_CUDA_GRAPHS=ON bash .gpu/build.sh $TARGETS > "$OUT_DIR/build.log" 2>&1
rc=$?
tail -20 "$OUT_DIR/build.log"
if [ "$rc" -ne 0 ] && grep -q "FAILED.*decode_replay_cuda" /tmp/b-build.log; then
  # The graph replay failed to compile against this LibTorch: keep its errors, and build
  # the eager decode instead so the tests and the bench still run.
  fail "$rc"
  cp /tmp/b-build.log "$OUT_DIR/build-graphs.log"
  note "build again without CUDA graphs"
  # shellcheck disable=SC2086
  CMAKE_EXTRA=-DHEADROOM_CUDA_GRAPHS=OFF bash .gpu/build.sh $TARGETS > "$OUT_DIR/build-eager.log" 2>&1
  rc=$?
  tail -5 "$OUT_DIR/build-eager.log"
fi
fail "$rc"
# shellcheck disable=SC1091
source .gpu/env.sh

if [ "$SUITE" = 1 ]; then
  note "whole suite"
  (cd /tmp/b && timeout $(($(left) / 2)) ctest -j 8 --output-on-failure) > "$OUT_DIR/suite.log" 2>&1
  fail $?
  grep -E "tests passed|\*\*\*Failed|Not Run|Timeout" "$OUT_DIR/suite.log" | tail -30
fi

note "tests"
(cd /tmp/b && timeout 150 ctest -L gpu --output-on-failure; a=$?
 timeout 60 ctest -R worker_loader_binding_test --output-on-failure; b=$?; [ $a -eq 0 ] && [ $b -eq 0 ]) \
  > "$OUT_DIR/ctest.log" 2>&1
fail $?
grep -E "tests passed|Passed|Failed|Skipped|SKIPPED" "$OUT_DIR/ctest.log" | tail -20

note "link"
{
  echo "# headroom-worker link command"
  ninja -C /tmp/b -t commands headroom-worker | tail -1
  echo "# DT_NEEDED of headroom-worker, in load order"
  readelf -d /tmp/b/bin/headroom-worker | grep NEEDED
  echo "# toolchain"
  c++ --version | head -1; ld --version | head -1; cmake --version | head -1
  CXX_USED=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' /tmp/b/CMakeCache.txt)
  echo "# the compiler CMake used: $CXX_USED"
  ls -la "$CXX_USED"; readlink -f "$CXX_USED"; "$CXX_USED" --version | head -1
  for f in libstdc++.so libstdc++.so.6 libstdc++.a; do echo "$f -> $("$CXX_USED" -print-file-name=$f)"; done
  echo "# the configure-time choice (cmake/libstdcxx_first.cmake)"
  grep -A6 "libstdc++ first\|no link option" /tmp/b-configure.log
  echo "# linker options the compiler driver adds"
  "$CXX_USED" -dumpspecs | grep -o -- "[^ ]*as-needed[^ ]*" | sort | uniq -c
} > "$OUT_DIR/link.log" 2>&1
head -8 "$OUT_DIR/link.log"

note "bench"
compile=${HEADROOM_GPU_BENCH_COMPILE:-1}
[ "$(left)" -ge "${HEADROOM_GPU_SESSION_COMPILE_S:-240}" ] || compile=0
HEADROOM_GPU_BENCH_COMPILE=$compile HEADROOM_GPU_BENCH_ROUNDS=${HEADROOM_GPU_BENCH_ROUNDS:-1} \
  timeout "$(left)" bench/gpu/run.sh /tmp/b > "$OUT_DIR/bench.log" 2>&1
bench_rc=$?
fail $bench_rc
tail -15 "$OUT_DIR/bench.log"

# One table: what was built, what each test said, what the decode ran, and the ratios.
{
  echo "| stage | result |"
  echo "|---|---|"
  if [ -f "$OUT_DIR/build-eager.log" ]; then
    echo "| build | CUDA graphs failed to compile (build-graphs.log); built without them |"
  else
    echo "| build | $([ "$rc" -eq 0 ] && echo ok || echo "failed, rc $rc (build.log)") |"
  fi
  ran=$(grep -cE "Test +#[0-9]+: " "$OUT_DIR/ctest.log" 2>/dev/null)
  passed=$(grep -cE "Test +#[0-9]+: .* Passed" "$OUT_DIR/ctest.log" 2>/dev/null)
  skipped=$(grep -cE "Test +#[0-9]+: .*Skipped" "$OUT_DIR/ctest.log" 2>/dev/null)
  failing=$(grep -E "Test +#[0-9]+: .*(Failed|Timeout|Exception|Not Run)" "$OUT_DIR/ctest.log" 2>/dev/null |
            sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/' | tr '\n' ' ')
  echo "| gpu tests | ${ran:-0} run: ${passed:-0} passed, ${skipped:-0} skipped${failing:+; failed: $failing} |"
  decode=$(grep -m1 "^decode " "$OUT_DIR/bench.log" | sed -E 's/^decode +//')
  echo "| decode (hf_grpo_bench) | ${decode:-no decode line (bench.log)} |"
  for pattern in "^ +hf_grpo_bench:" "^ +transformers:" "^ratio:" "^base +cpp" "^base +python-eager" \
                 "^base +python-compile" "^base ratio:"; do
    line=$(grep -m1 -E "$pattern" "$OUT_DIR/bench.log" | sed -E 's/^ +//')
    [ -n "$line" ] && echo "| ${line%%:*} | $(echo "${line#*: }" | tr -s " ") |"
  done
  [ "$compile" = 0 ] && echo "| torch.compile | not run: under ${HEADROOM_GPU_SESSION_COMPILE_S:-240} s left |"
  [ "$bench_rc" -eq 124 ] && echo "| bench | cut off at the session's deadline (bench.log has what ran) |"
  echo "| status | $status, $(date -u +%Y-%m-%dT%H:%MZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) |"
} > "$OUT_DIR/summary.txt"
note "summary"
cat "$OUT_DIR/summary.txt"
exit "$status"
