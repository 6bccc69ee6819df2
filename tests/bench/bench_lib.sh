# Shared by the benchmark scripts (sourced, not run); they set `repo` and `build` first.

# The bundled GPT-2 tokenizer's flags.
tokenizer=(--tokenizer-type GPT2BPETokenizer --vocab-file "$repo/data/gpt2/vocab.json"
           --merge-file "$repo/data/gpt2/merges.txt")

# <dir>/shakespeare_text_document.{bin,idx} from the bundled Shakespeare.
make_shakespeare_dataset() {  # dir
  python3 "$repo/scripts/text_to_jsonl.py" "$repo/data/corpora/tinyshakespeare.txt" "$1/corpus.jsonl"
  "$build/bin/preprocess" --input "$1/corpus.jsonl" --output-prefix "$1/shakespeare" \
    "${tokenizer[@]}" --append-eod --workers 1 > /dev/null
}

# Open MPI as the e2e tests run it: as root allowed, more ranks than cores allowed, waiting ranks
# yield; a distributed call gives up after `timeout` seconds.
use_mpirun() {  # timeout
  command -v mpirun > /dev/null ||
    { echo "mpirun not found (scripts/install-deps.sh installs openmpi-bin)" >&2; exit 2; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
  export MDS_DIST_TIMEOUT_S="$1"
}
