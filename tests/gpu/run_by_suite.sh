#!/usr/bin/env bash
# Runs a GoogleTest binary one test suite per process, so that a kernel that faults (a sticky CUDA
# error poisons the rest of its process) or a crash costs its own suite, not every test after it.
# Prints each suite's result line as it ends and a summary; the exit status is the number of
# suites that failed or crashed (0 when all passed).
#
# Usage: tests/gpu/run_by_suite.sh BINARY [GTEST_FILTER]   (the filter picks the suites; each
#        picked suite runs whole)
set -uo pipefail
binary=$1
filter=${2:-*}
mapfile -t suites < <("$binary" --gtest_list_tests --gtest_filter="$filter" |
  sed -n 's/^\([^ ][^ ]*\)\.\( .*\)\{0,1\}$/\1/p')
[ "${#suites[@]}" -gt 0 ] || { echo "run_by_suite: $binary lists no suites for '$filter'" >&2; exit 1; }
failed=()
passed_tests=0
start=$(date +%s)
for suite in "${suites[@]}"; do
  log=$(mktemp)
  suite_start=$(date +%s)
  "$binary" --gtest_filter="$suite.*" --gtest_color=no > "$log" 2>&1
  rc=$?
  cat "$log"
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
