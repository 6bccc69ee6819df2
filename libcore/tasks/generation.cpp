#include "tasks/generation.h"

#include <algorithm>
#include <span>

#include "base/error.h"

namespace mds::tasks {

std::vector<GenerationResult> generate(const GptInference& model,
                                       const std::vector<GenerationRow>& rows,
                                       const GenerationOptions& options) {
  const std::int64_t b = static_cast<std::int64_t>(rows.size());
  if (b == 0) return {};
  const std::int64_t s = options.seq_length;
  const std::int64_t vp = model.padded_vocab_size();
  const std::int64_t vocab = std::min(options.vocab_size > 0 ? options.vocab_size : vp, vp);
  std::vector<std::vector<std::int64_t>> tokens(static_cast<std::size_t>(b));
  std::vector<std::int64_t> last(static_cast<std::size_t>(b));  // last position a row may fill
  std::vector<GenerationResult> results(static_cast<std::size_t>(b));
  std::vector<TokenSampler> samplers;
  std::int64_t shortest = s;
  for (std::int64_t r = 0; r < b; ++r) {
    const auto& context = rows[static_cast<std::size_t>(r)].context;
    const std::int64_t length = static_cast<std::int64_t>(context.size());
    if (length == 0 || length >= s) {
      base::fail("generate: a context of ", length, " tokens; it must have 1 to ", s - 1);
    }
    shortest = std::min(shortest, length);
    auto& row = tokens[static_cast<std::size_t>(r)];
    row.assign(static_cast<std::size_t>(s), options.eod);
    std::copy(context.begin(), context.end(), row.begin());
    // Upstream lets a row fill position context + out_seq_length, one token more than asked.
    last[static_cast<std::size_t>(r)] = std::min(s - 1, length + options.out_seq_length - 1);
    results[static_cast<std::size_t>(r)].context_length = length;
    samplers.emplace_back(options.seed, rows[static_cast<std::size_t>(r)].stream);
  }

  KvCache cache = model.make_cache(b, s);
  const auto feed = [&](std::int64_t from, std::int64_t count) {
    if (options.recompute) {
      cache.clear();
      count += from;
      from = 0;
    }
    std::vector<std::int64_t> input(static_cast<std::size_t>(b * count));
    for (std::int64_t r = 0; r < b; ++r) {
      const auto& row = tokens[static_cast<std::size_t>(r)];
      std::copy(row.begin() + from, row.begin() + from + count, input.begin() + r * count);
    }
    return model.forward(cache, input, count, 1);
  };

  std::vector<bool> done(static_cast<std::size_t>(b), false);
  // The last stage's head rank chooses the tokens; every rank of the grid follows its choice.
  std::vector<std::int64_t> chosen(static_cast<std::size_t>(b));
  const tensor::Tensor shared(chosen.data(), tensor::DType::kInt64, {b});
  std::vector<float> logits = feed(0, shortest);
  for (std::int64_t c = shortest;; ++c) {
    std::fill(chosen.begin(), chosen.end(), -1);
    if (model.has_logits()) {
      for (std::int64_t r = 0; r < b; ++r) {
        const std::size_t i = static_cast<std::size_t>(r);
        if (done[i] || c < results[i].context_length) continue;
        std::span<float> row(logits.data() + r * vp, static_cast<std::size_t>(vocab));
        chosen[i] = samplers[i].next(row, options.sampling);
      }
    }
    model.comms().share_from_head(shared);
    bool all_done = true;
    for (std::int64_t r = 0; r < b; ++r) {
      const std::size_t i = static_cast<std::size_t>(r);
      if (done[i]) continue;
      if (c >= results[i].context_length) {
        const std::int64_t id = chosen[i];
        tokens[i][static_cast<std::size_t>(c)] = id;
        if (id == options.eod || c == last[i]) {
          done[i] = true;
          results[i].finished = id == options.eod;
          results[i].tokens.assign(tokens[i].begin(), tokens[i].begin() + c + 1);
        }
      }
      all_done = all_done && done[i];
    }
    if (all_done) break;
    logits = feed(c, 1);
  }
  return results;
}

}  // namespace mds::tasks
