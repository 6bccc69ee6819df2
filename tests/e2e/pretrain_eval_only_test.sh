#!/usr/bin/env bash
# --eval-only True (upstream's do_train false): a loaded checkpoint is evaluated on the validation
# and test data as at the end of training, with no training step and no save; "False" trains (upstream
# reads the flag with type=bool, so there "False" would mean True as well).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
make_shakespeare_dataset "$WORK/shakespeare"
write_ds_config "$WORK/ds.json" fp32 0
common=("${tiny_model_flags[@]}" --data-path "$WORK/shakespeare_text_document" "${gpt2_flags[@]}"
        --deepspeed --deepspeed_config "$WORK/ds.json" --log-interval 1 --lr-decay-iters 5)
run() {  # name flags...
  local name=$1; shift
  "$MDS_BIN/pretrain" "${common[@]}" "$@" > "$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; fail "$name: pretrain failed"; }
}
end_lines() { grep -E '^(valid|test) loss at the end of training' "$1"; }

run trained --train-iters 5 --save "$WORK/ckpt" --save-interval 5
before=$(ls -l --time-style=full-iso -R "$WORK/ckpt")
run evaluated --train-iters 5 --load "$WORK/ckpt" --save "$WORK/ckpt" --save-interval 1 --eval-only True
[ "$(end_lines "$WORK/evaluated.log" | wc -l)" = 2 ] || { cat "$WORK/evaluated.log"; fail "expected a valid and a test line"; }
[ "$(end_lines "$WORK/evaluated.log")" = "$(end_lines "$WORK/trained.log")" ] ||
  fail "eval-only losses differ from the end of training's"
grep -qE '^ iteration ' "$WORK/evaluated.log" && fail "eval-only trained"
grep -q 'saving checkpoint' "$WORK/evaluated.log" && fail "eval-only saved"
[ "$(ls -l --time-style=full-iso -R "$WORK/ckpt")" = "$before" ] || fail "eval-only touched the checkpoint folder"
pass "--eval-only True: the end-of-training evaluation of the checkpoint, no step, no save"

run more --train-iters 6 --load "$WORK/ckpt" --eval-only false
[ "$(grep -cE '^ iteration +6/' "$WORK/more.log")" = 1 ] || { cat "$WORK/more.log"; fail "--eval-only false did not train"; }
pass "--eval-only false trains"

# --eval-iters 0 is upstream's "no validation, no test" (it used to evaluate nothing and print NaN).
run no-eval --train-iters 5 --eval-interval 2 --eval-iters 0
grep -q ' loss at ' "$WORK/no-eval.log" && { cat "$WORK/no-eval.log"; fail "--eval-iters 0 evaluated"; }
pass "--eval-iters 0: no validation or test lines"

rc=0; "$MDS_BIN/pretrain" "${common[@]}" --train-iters 5 --eval-only maybe > "$WORK/bad.log" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$(cat "$WORK/bad.log")" = "pretrain: error: --eval-only: expected True or False, got 'maybe'" ] ||
  { cat "$WORK/bad.log"; fail "bad --eval-only value: rc $rc"; }
pass "a value that is not a boolean fails with one line"
finish
