# Shared helpers for the e2e shell tests (sourced, not run). Each test gets a fresh scratch folder.
set -euo pipefail
: "${MDS_BIN:?set by CTest: folder of the built programs}"
: "${MDS_DATA:?set by CTest: the repository data folder}"
: "${MDS_PYTHON:=/usr/bin/python3}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/mds-e2e.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
CHECKS=0

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { CHECKS=$((CHECKS + 1)); echo "ok: $*"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
expect_sha() {  # file expected-sha256 description
  local got; got="$(sha "$1")"
  [ "$got" = "$2" ] || fail "$3: sha256 of $(basename "$1") is $got, expected $2"
  pass "$3"
}
expect_same_files() {  # a b description
  cmp -s "$1" "$2" || fail "$3: $1 and $2 differ"
  pass "$3"
}
# Runs a command that must fail; its stderr must contain the given text.
expect_failure() {  # "expected text" command...
  local text=$1; shift
  local out rc=0
  out="$("$@" 2>&1 >/dev/null)" || rc=$?
  [ "$rc" -ne 0 ] || fail "expected failure of: $*"
  grep -qF -- "$text" <<<"$out" || fail "stderr of '$*' lacks '$text': $out"
  pass "fails with '$text'"
}
expect_no_outputs() {  # prefix
  local left; left="$(ls "$1"* 2>/dev/null || true)"
  [ -z "$left" ] || fail "files left behind: $left"
  pass "no output left for $(basename "$1")"
}
finish() { echo "$CHECKS passed, 0 failed"; }
gpt2_flags=(--tokenizer-type GPT2BPETokenizer --vocab-file "$MDS_DATA/gpt2/vocab.json"
            --merge-file "$MDS_DATA/gpt2/merges.txt")
