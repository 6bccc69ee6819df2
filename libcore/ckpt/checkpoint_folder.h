// Publishing a checkpoint folder all at once, and the small text markers beside it.
#pragma once

#include <optional>
#include <string>

namespace mds::ckpt {

// A folder written under a hidden temporary name beside its final one and renamed into place by
// commit(); destroying it uncommitted removes it. A folder already at the final path is swapped
// out atomically (renameat2 RENAME_EXCHANGE where the file system has it) and then removed.
class StagedFolder {
 public:
  // kCreate makes the temporary folder (removing a crashed save's leftovers) and owns it; kJoin
  // writes into one another process created with the same name and leaves it alone.
  enum class Role { kCreate, kJoin };
  // `temp_name` names the temporary (".<final name>.tmp.<temp_name>"); empty: the process id.
  explicit StagedFolder(std::string final_path, const std::string& temp_name = "",
                        Role role = Role::kCreate);
  ~StagedFolder();
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;

  const std::string& path() const { return temp_path_; }
  std::string file(const std::string& name) const { return temp_path_ + "/" + name; }
  void commit();

 private:
  std::string final_path_;
  std::string temp_path_;
  bool committed_ = false;
  Role role_;
};

// Replaces `path` with `text` atomically (written aside, fsynced, renamed).
void write_text_file_atomically(const std::string& path, const std::string& text);
// The file's content, or nullopt when it does not exist; other failures are Errors.
std::optional<std::string> read_text_file_if_exists(const std::string& path);

}  // namespace mds::ckpt
