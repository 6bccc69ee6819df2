#include "ckpt/checkpoint_folder.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2 (glibc >= 2.28, _GNU_SOURCE)
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/mapped_file.h"

namespace mds::ckpt {

namespace fs = std::filesystem;

namespace {

void remove_tree(const fs::path& path) {
  std::error_code error;
  fs::remove_all(path, error);
  if (error) base::fail("cannot remove ", path.string(), ": ", error.message());
}

// Makes a rename in `folder` durable (best effort: some file systems refuse to fsync folders).
void sync_folder(const fs::path& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Swaps two existing paths atomically; false when the file system cannot.
bool exchange(const std::string& a, const std::string& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) return true;
  if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) return false;
  base::fail_errno("cannot swap " + a + " into place at " + b);
}

}  // namespace

StagedFolder::StagedFolder(std::string final_path, const std::string& temp_name, Role role)
    : final_path_(std::move(final_path)), role_(role) {
  const fs::path target(final_path_);
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  // (Built with += : GCC 12 warns falsely (-Wrestrict) on "." + name + ....)
  std::string stem = ".";
  stem += target.filename().string();
  stem += ".tmp.";
  temp_path_ =
      (parent / (stem + (temp_name.empty() ? std::to_string(::getpid()) : temp_name))).string();
  if (role_ == Role::kJoin) {
    if (!fs::is_directory(temp_path_))
      base::fail("checkpoint staging folder ", temp_path_, " does not exist");
    return;
  }
  std::error_code error;
  fs::create_directories(parent, error);
  if (error) base::fail("cannot create ", parent.string(), ": ", error.message());
  // A crashed earlier save of the same tag leaves its hidden temporary behind.
  for (const auto& entry : fs::directory_iterator(parent)) {
    if (entry.path().filename().string().rfind(stem, 0) == 0) remove_tree(entry.path());
  }
  fs::create_directory(temp_path_, error);
  if (error) base::fail("cannot create ", temp_path_, ": ", error.message());
}

StagedFolder::~StagedFolder() {
  if (committed_ || role_ == Role::kJoin) return;
  std::error_code ignored;
  fs::remove_all(temp_path_, ignored);
}

void StagedFolder::commit() {
  if (role_ == Role::kJoin) base::fail("StagedFolder: only the creating process commits");
  sync_folder(temp_path_);
  std::error_code error;
  if (!fs::exists(final_path_, error)) {
    if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
      base::fail_errno("cannot rename " + temp_path_ + " to " + final_path_);
    }
  } else if (exchange(temp_path_, final_path_)) {
    remove_tree(temp_path_);  // now holds the replaced folder
  } else {
    // No atomic swap here: move the old folder aside first, so a crash leaves it recoverable.
    const std::string aside = temp_path_ + ".old";
    if (::rename(final_path_.c_str(), aside.c_str()) != 0) {
      base::fail_errno("cannot move " + final_path_ + " aside");
    }
    if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
      base::fail_errno("cannot rename " + temp_path_ + " to " + final_path_);
    }
    remove_tree(aside);
  }
  committed_ = true;
  sync_folder(fs::path(final_path_).parent_path().empty() ? fs::path(".")
                                                          : fs::path(final_path_).parent_path());
}

void write_text_file_atomically(const std::string& path, const std::string& text) {
  base::AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

std::optional<std::string> read_text_file_if_exists(const std::string& path) {
  std::error_code error;
  if (!fs::exists(path, error)) {
    if (error) base::fail("cannot look for ", path, ": ", error.message());
    return std::nullopt;
  }
  return base::read_file(path);
}

}  // namespace mds::ckpt
