// `pretrain --universal-checkpoint`: resuming from a universal checkpoint (checkpoints.md §3.4)
// on any grid — TP, PP, DP size and ZeRO stage may all differ from the run that wrote it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/log.h"
#include "ckpt/trainer_checkpoint.h"
#include "io/torch_file.h"
#include "model/param_table.h"
#include "train/trainer.h"

namespace mds::ckpt {

// One state file zero/<name>/<state>.pt: the full (unsharded) tensor as fp32.
struct UniversalTensor {
  std::vector<std::int64_t> shape;  // full shape (the vocabulary's padded rows included)
  std::vector<float> values;
};

// Reads zero/<name>/<state>.pt (a dict whose "param" is an fp32 tensor); errors name the file.
UniversalTensor read_universal_tensor(const std::string& path);

// This TP rank's slice of `full` for a parameter of `local_shape` split `split` over `tp_size`
// ranks, flattened. The dimension comes from the parameter itself (column-parallel and vocabulary
// rows, row-parallel columns), not from the file's cat_dim, which a converter from a T = 1
// checkpoint cannot know; replicated parameters must have their local shape. The vocabulary may
// have more rows than tp_size · local rows (rows beyond the new padded size are cut; they must be
// padding: at least `original_vocab` rows stay) or fewer (zero rows are added: unlike upstream's
// v0.1 loader, which overwrites real rows when the padded size grows). `what` names the file.
std::vector<float> universal_slice(const UniversalTensor& full,
                                   const std::vector<std::int64_t>& local_shape,
                                   std::int64_t tp_rank, std::int64_t tp_size, model::TpSplit split,
                                   std::int64_t original_vocab, const std::string& what);

// Reads <dir>/latest_universal and the folder it names into the trainer: counters, LR scheduler
// and args from an mp_rank file (as load_trainer_checkpoint), the fp32 masters and — unless
// --no-load-optim or --finetune — the Adam moments and step of this rank's parameters from
// zero/<engine name>/, after which the 16-bit weights are the masters rounded. Returns false (with
// a warning) when there is no latest_universal file. Errors name the file.
bool load_universal_checkpoint(const std::string& dir, train::Trainer& trainer,
                               const RunDescription& run, const base::Log& log);

}  // namespace mds::ckpt
