// TensorBoard event files as torch.utils.tensorboard.SummaryWriter writes them: TFRecord framing
// around Event protocol buffers, encoded by hand (the few fields needed) so that no protobuf
// library is required.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace mds::io {

// How a scalar is stored. Upstream runs torch ≥ 1.9, where megatron/global_vars.py makes
// add_scalar use new_style=True: a DT_FLOAT TensorProto with plugin "scalars". Old-style files
// carry Summary.Value.simple_value instead; TensorBoard reads both.
enum class ScalarStyle { kTensor, kSimpleValue };

// One TFRecord: u64 length, masked CRC-32C of those 8 bytes, the data, masked CRC-32C of the data
// (all little-endian).
std::string tfrecord_frame(std::string_view data);

// Serialized Event messages (proto3: wall_time and step are left out when 0, as protobuf does;
// oneof members such as simple_value are always written). The first event of every file:
// file_version "brain.Event:2".
std::string encode_file_version_event(double wall_time);
std::string encode_scalar_event(double wall_time, std::int64_t step, std::string_view tag,
                                float value, ScalarStyle style);
// SummaryWriter.add_text: tag "<tag>/text_summary", plugin "text", a DT_STRING tensor of shape [1].
std::string encode_text_event(double wall_time, std::int64_t step, std::string_view tag,
                              std::string_view text);

// Where summaries go: an event file, or a recorder in tests.
class SummarySink {
 public:
  virtual ~SummarySink() = default;
  virtual void add_scalar(std::string_view tag, double value, std::int64_t step) = 0;
  virtual void add_text(std::string_view tag, std::string_view text, std::int64_t step) = 0;
};

// An event file in `log_dir` (created with its parents), named as TensorBoard's EventFileWriter
// names it: events.out.tfevents.<10-digit unix seconds>.<hostname>.<pid>.<n>, n counting up from 0
// past any file that exists already. Every event goes to the file as soon as it is added
// (upstream queues up to --tensorboard-queue-size events), so a crash loses nothing added before
// it; a record that cannot be written whole is cut off again before the error is thrown.
class TensorboardWriter : public SummarySink {
 public:
  explicit TensorboardWriter(const std::string& log_dir, ScalarStyle style = ScalarStyle::kTensor);
  ~TensorboardWriter() override;
  TensorboardWriter(const TensorboardWriter&) = delete;
  TensorboardWriter& operator=(const TensorboardWriter&) = delete;

  // The value is stored as a 32-bit float, as TensorBoard does.
  void add_scalar(std::string_view tag, double value, std::int64_t step) override;
  void add_text(std::string_view tag, std::string_view text, std::int64_t step) override;
  const std::string& path() const { return path_; }

 private:
  void write_record(std::string_view event);

  std::string path_;
  ScalarStyle style_;
  int fd_ = -1;
  std::int64_t bytes_ = 0;  // whole records written so far
};

}  // namespace mds::io
