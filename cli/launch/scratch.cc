#include "cli/launch/scratch.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/sysinfo.h"

namespace psbench {
namespace fs = std::filesystem;

namespace {

constexpr absl::string_view kPrefix = "psbench-scratch-";
constexpr size_t kRandomChars = 6;  // mkdtemp's XXXXXX
// Written in every scratch directory once it is locked, naming the host: a directory without
// it, or another host's, is never swept (other tools' psbench-* directories, one being made).
constexpr char kMarker[] = "owner";

// psbench-scratch-WHAT.XXXXXX: what ScratchDir::Create makes.
bool IsScratchName(absl::string_view name) {
  if (!absl::StartsWith(name, kPrefix)) return false;
  const size_t dot = name.rfind('.');
  return dot != absl::string_view::npos && dot > kPrefix.size() &&
         name.size() - dot - 1 == kRandomChars;
}

// Made by a psbench on this host: where $TMPDIR is shared between hosts, another host's lock
// may not be visible here.
bool MarkedByThisHost(const std::string& dir) {
  const std::string marker = dir + "/" + kMarker;
  struct stat st {};
  if (lstat(marker.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  std::string host;
  std::ifstream(marker) >> host;
  return host == HostName();
}

int OpenDir(const std::string& path) {
  return open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

}  // namespace

std::string TempRoot() {
  const char* env = getenv("TMPDIR");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string("/tmp");
}

absl::StatusOr<std::unique_ptr<ScratchDir>> ScratchDir::Create(absl::string_view what) {
  const std::string pattern = absl::StrCat(TempRoot(), "/", kPrefix, what, ".XXXXXX");
  // A sweeping psbench may take the lock of a directory made but not yet locked, and remove
  // it; the lock is then ours on a directory that is gone (no links), and we try again.
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (mkdtemp(name.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create a temporary directory ", pattern,
                                              ": ", std::strerror(errno), " (set TMPDIR)"));
    }
    const std::string path(name.data());
    const int fd = OpenDir(path);
    if (fd < 0) {
      const int err = errno;
      rmdir(path.c_str());
      return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(err)));
    }
    if (flock(fd, LOCK_EX) != 0) {
      // No locks on this file system (some NFS and Lustre mounts): used unlocked and
      // unmarked, so no sweep ever takes it; psbench still removes it when done.
      return std::unique_ptr<ScratchDir>(new ScratchDir(path, fd));
    }
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_nlink > 0) {
      std::ofstream(path + "/" + kMarker) << HostName() << " " << getpid() << "\n";
      return std::unique_ptr<ScratchDir>(new ScratchDir(path, fd));
    }
    close(fd);
  }
  return absl::InternalError(absl::StrCat("cannot create a temporary directory ", pattern));
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
  close(fd_);
}

int SweepStaleScratch() {
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(TempRoot(), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!IsScratchName(name)) continue;
    const std::string path = it->path().string();
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        !MarkedByThisHost(path)) {
      continue;
    }
    const int fd = OpenDir(path);
    if (fd < 0) continue;
    // Free only when the psbench that made it is gone: remove it while holding its lock.
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      std::error_code rm;
      if (fs::remove_all(path, rm) > 0) ++removed;
    }
    close(fd);
  }
  return removed;
}

}  // namespace psbench
