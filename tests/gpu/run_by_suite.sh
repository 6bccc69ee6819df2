#!/usr/bin/env bash
# Runs a GoogleTest binary one test suite per process, so that a kernel that faults (a sticky CUDA
# error poisons the rest of its process) or a crash costs its own suite, not every test after it.
# Prints each suite's result line as it ends and a summary; the exit status is the number of
# suites that failed, crashed or ran out of time (0 when all passed). Output is printed as it
# comes, so a suite killed by its own or the caller's time limit still shows how far it got.
#
# Usage: tests/gpu/run_by_suite.sh BINARY [GTEST_FILTER]   (the filter picks the suites; each
#        picked suite runs whole)
# Environment: MDS_GPU_SUITE_TIMEOUT, seconds one suite may run (default 120).
set -uo pipefail
binary=$1
filter=${2:-*}
suite_timeout=${MDS_GPU_SUITE_TIMEOUT:-120}
mapfile -t suites < <("$binary" --gtest_list_tests --gtest_filter="$filter" |
  sed -n 's/^\([^ ][^ ]*\)\.\( .*\)\{0,1\}$/\1/p')
[ "${#suites[@]}" -gt 0 ] || { echo "run_by_suite: $binary lists no suites for '$filter'" >&2; exit 1; }
failed=()
passed_tests=0
start=$(date +%s)
for suite in "${suites[@]}"; do
  log=$(mktemp)
  suite_start=$(date +%s)
  timeout --kill-after=5 "$suite_timeout" "$binary" --gtest_filter="$suite.*" --gtest_color=no 2>&1 |
    tee "$log"
  rc=${PIPESTATUS[0]}
  [ "$rc" != 124 ] && [ "$rc" != 137 ] || echo "run_by_suite: $suite killed after its limit of $suite_timeout s"
  passed=$(grep -c '^\[       OK \]' "$log")
  passed_tests=$((passed_tests + passed))
  if [ "$rc" != 0 ]; then
    failed+=("$suite(exit $rc)")
    echo "run_by_suite: $suite FAILED (exit $rc, $passed passed) in $(( $(date +%s) - suite_start )) s"
  else
    echo "run_by_suite: $suite ok ($passed tests) in $(( $(date +%s) - suite_start )) s"
  fi
  rm -f "$log"
done
echo "run_by_suite: ${#suites[@]} suites, $passed_tests tests passed, ${#failed[@]} suites failed" \
  "in $(( $(date +%s) - start )) s${failed[*]:+: ${failed[*]}}"
exit "${#failed[@]}"
