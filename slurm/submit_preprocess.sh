#!/usr/bin/env bash
# slurm/submit_preprocess.sh — preprocesses a corpus split into shards on a SLURM cluster: submits
# slurm/preprocess_array.sbatch as a job array (one task per shard) and slurm/merge.sbatch with
# --dependency=afterok on the whole array, so the merge runs only when every shard succeeded (if
# one fails, the merge job stays pending with DependencyNeverSatisfied; scancel it).
#
# Usage: slurm/submit_preprocess.sh SHARD [SHARD ...]
#   The shards are JSON-lines files (plain, .zst, .xz, .gz), consecutive pieces of the corpus in
#   order (e.g. `split -n l/64 -d corpus.jsonl shard-`); the merged dataset then equals the one
#   `preprocess` makes from the whole corpus, byte for byte.
#
# Variables (default in brackets; also those of preprocess_array.sbatch and merge.sbatch, which
# the jobs receive through the environment: MDS_BIN, MDS_DATA, TOKENIZER_TYPE, VOCAB_FILE,
# MERGE_FILE, TOKENIZER_MODEL, JSON_KEY, APPEND_EOD, WORKERS, PREPROCESS_ARGS, REMOVE_PARTS):
#   OUTPUT_DIR (required)  parts/, logs/, shards.txt and the merged dataset go here
#   OUTPUT_NAME [corpus]   merged dataset: $OUTPUT_DIR/${OUTPUT_NAME}_<key>_document
#   MAX_PARALLEL []        at most this many array tasks at once (--array=...%N)
#   CPUS_PER_TASK [1]      cores per array task (WORKERS defaults to it)
#   SBATCH_ARGS []         more sbatch flags for both jobs, word-split (e.g. "--partition=cpu")
#   MDS_BIN [$PWD/build/release/bin]  (set here so the jobs need no SLURM_SUBMIT_DIR guess)
#
# Prints the two job ids as ARRAY_JOB_ID=... and MERGE_JOB_ID=... lines. Example:
#   split -n l/8 -d --additional-suffix=.jsonl oscar.jsonl /scratch/oscar-
#   OUTPUT_DIR=/scratch/oscar-gpt2 OUTPUT_NAME=oscar CPUS_PER_TASK=8 \
#     slurm/submit_preprocess.sh /scratch/oscar-0*.jsonl
#   # then: DATA_PATH=/scratch/oscar-gpt2/oscar_text_document bash slurm/pretrain.sbatch
set -euo pipefail

die() {
  echo "submit_preprocess.sh: $*" >&2
  exit 2
}
[ "$#" -gt 0 ] || die "usage: slurm/submit_preprocess.sh SHARD [SHARD ...] (see the top of this file)"
: "${OUTPUT_DIR:?set OUTPUT_DIR (see the top of slurm/submit_preprocess.sh)}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$OUTPUT_DIR/logs"
OUTPUT_DIR="$(cd "$OUTPUT_DIR" && pwd)"
export OUTPUT_DIR
export MDS_BIN="${MDS_BIN:-$PWD/build/release/bin}"
export MDS_DATA="${MDS_DATA:-$PWD/data}"
[ -x "$MDS_BIN/preprocess" ] || die "no preprocess program in MDS_BIN=$MDS_BIN"

export SHARD_LIST="$OUTPUT_DIR/shards.txt"
: > "$SHARD_LIST"
for shard in "$@"; do
  [ -r "$shard" ] || die "cannot read shard $shard"
  # Absolute paths: the array tasks may start in another folder.
  echo "$(cd "$(dirname "$shard")" && pwd)/$(basename "$shard")" >> "$SHARD_LIST"
done
count="$#"

# shellcheck disable=SC2206 # word splitting of the user's extra flags is intended
common=(--parsable --cpus-per-task="${CPUS_PER_TASK:-1}" ${SBATCH_ARGS:-})
array="0-$((count - 1))${MAX_PARALLEL:+%$MAX_PARALLEL}"
array_id="$(sbatch "${common[@]}" --array="$array" \
  --output="$OUTPUT_DIR/logs/preprocess-%A_%a.out" "$here/preprocess_array.sbatch")"
array_id="${array_id%%;*}" # --parsable prints "id" or "id;cluster"
merge_id="$(sbatch "${common[@]}" --dependency="afterok:$array_id" \
  --output="$OUTPUT_DIR/logs/merge-%j.out" "$here/merge.sbatch")"
merge_id="${merge_id%%;*}"
echo "submitted $count preprocess tasks and the merge; logs in $OUTPUT_DIR/logs"
echo "ARRAY_JOB_ID=$array_id"
echo "MERGE_JOB_ID=$merge_id"
