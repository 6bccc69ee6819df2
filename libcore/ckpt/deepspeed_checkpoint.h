// DeepSpeed pipeline checkpoints, file for file and key for key as the fork's Megatron +
// DeepSpeed 0.8.3 write them (checkpoints.md §2), so that upstream tools and a resumed upstream
// run can use them, and so that mds resumes bit for bit. Each rank saves and loads its own files
// (state.ranks); data-parallel ranks above 0 write only their ZeRO files.
#pragma once

#include <optional>
#include <string>

#include "ckpt/checkpoint_folder.h"
#include "ckpt/training_state.h"
#include "dist/communicator.h"

namespace mds::ckpt {

// Writes <dir>/global_step<global_steps>/ (layer files, mp_rank_XX_model_states.pt and the
// layout's optimizer file) under a temporary name, renames it into place (replacing a folder of
// the same tag), then writes <dir>/latest ("global_stepN", no newline) atomically, last. With a
// world of several ranks every rank calls this together: all write into one staging folder and
// the folder is published, and `latest` moved, only after every rank finished.
void save_deepspeed_checkpoint(const std::string& dir, const TrainingState& state,
                               const SaveOptions& options = {},
                               dist::Communicator* world = nullptr);

// One rank's files of that checkpoint (its layer files and mp_rank file when ranks.dp is 0, its
// ZeRO file) written into `folder`, for a program that writes every rank's files itself; the
// caller commits the folder and then moves `latest`.
void write_deepspeed_rank_files(const StagedFolder& folder, const TrainingState& state,
                                const SaveOptions& options = {});

// The tag in <dir>/latest, or nullopt when there is no such file (start from scratch).
std::optional<std::string> read_latest_tag(const std::string& dir);

// Reads <dir>/<tag> into the state's buffers and counters. Every file's zip CRCs are verified and
// every expected tensor must be present with the expected name, shape and dtype; all checks pass
// before anything is written, so on an Error (one line naming the file and key, e.g.
// ".../layer_03-model_00-model_states.pt: self_attention.dense.weight: expected shape [16, 16],
// found [16, 8]") the state is unchanged.
LoadedCheckpoint load_deepspeed_checkpoint(const std::string& dir, const std::string& tag,
                                           TrainingState& state, const LoadOptions& options = {});

}  // namespace mds::ckpt
