// Independent work items (generate's batches) spread over the D model replicas of an inference
// grid: item i runs on replica i mod D, in rounds of D items, and after each round the output rank
// (global rank 0) receives every item's text of the round, so it writes them in item order. With
// one replica every item runs everywhere in turn, as before.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "tasks/inference_comms.h"

namespace mds::tasks {

// Every rank of replica r calls run_item(i) for each i < items with i mod D = r, in increasing
// order (the ranks of a replica together, as generate() needs); the output rank calls
// write(i, text of item i) for every i in order. Texts travel from the first TP rank of each
// replica's first stage (which has the item's result, as every rank of its replica does) over
// its DP group.
void run_items_on_replicas(
    const InferenceComms& comms, std::int64_t items,
    const std::function<std::string(std::int64_t item)>& run_item,
    const std::function<void(std::int64_t item, const std::string& text)>& write);

}  // namespace mds::tasks
