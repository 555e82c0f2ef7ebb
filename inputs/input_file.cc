#include "inputs/input_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace psbench {
namespace {

// "--trace=PATH: " for a flag, "report input 'PATH': " for anything else.
std::string Named(absl::string_view what, const std::string& path) {
  if (absl::StartsWith(what, "--")) return absl::StrCat(what, "=", path, ": ");
  return absl::StrCat(what, " '", path, "': ");
}

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

std::string Bytes(uint64_t n) {
  if (n >= (uint64_t{1} << 20) && n % (uint64_t{1} << 20) == 0) return absl::StrCat(n >> 20, " MiB");
  return absl::StrCat(n, n == 1 ? " byte" : " bytes");
}

// The checks on an open file: a regular file within the limit.
absl::Status CheckOpen(const struct stat& st, const std::string& path, absl::string_view what,
                       uint64_t max_bytes, absl::string_view limit_flag) {
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Named(what, path), "is ", KindOf(st.st_mode), ", not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        Named(what, path), "is ", st.st_size, " bytes, over the ", Bytes(max_bytes), " limit",
        limit_flag.empty() ? "" : absl::StrCat(" (raise it with ", limit_flag, ")")));
  }
  return absl::OkStatus();
}

// O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
absl::StatusOr<int> Open(const std::string& path, absl::string_view what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrCat(Named(what, path), "cannot open: ", std::strerror(err)));
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::string> ReadInputFile(const std::string& path, absl::string_view what,
                                          uint64_t max_bytes, absl::string_view limit_flag) {
  absl::StatusOr<int> fd = Open(path, what);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstat(*fd, &st) != 0) {
    const int err = errno;
    ::close(*fd);
    return absl::InternalError(absl::StrCat(Named(what, path), "cannot stat: ", std::strerror(err)));
  }
  if (absl::Status s = CheckOpen(st, path, what, max_bytes, limit_flag); !s.ok()) {
    ::close(*fd);
    return s;
  }
  // A regular file never blocks; the limit holds even if the file grows while it is read.
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(*fd, chunk, sizeof(chunk));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(*fd);
      return absl::Status(absl::ErrnoToStatusCode(err),
                          absl::StrCat(Named(what, path), "cannot read: ", std::strerror(err)));
    }
    if (text.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(*fd);
      return absl::InvalidArgumentError(absl::StrCat(
          Named(what, path), "grew over the ", Bytes(max_bytes), " limit while it was read"));
    }
    text.append(chunk, static_cast<size_t>(n));
  }
  ::close(*fd);
  return text;
}

absl::Status CheckOutputSpares(absl::string_view output_flag, const std::string& output,
                               const std::vector<NamedPath>& inputs) {
  if (output.empty() || output == "-") return absl::OkStatus();
  struct stat out;
  const bool exists = ::stat(output.c_str(), &out) == 0;
  std::error_code out_ec;
  // Absolute first: a relative path none of whose parts exists stays as written otherwise.
  const std::filesystem::path out_path =
      std::filesystem::weakly_canonical(std::filesystem::absolute(output, out_ec), out_ec);
  for (const NamedPath& in : inputs) {
    if (in.path.empty() || in.path == "-") continue;
    struct stat st;
    std::error_code in_ec;
    // An existing file by device and inode (a second name or a link is caught too); one not
    // yet written (another output) by its path.
    const bool same =
        exists ? ::stat(in.path.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino
               : !out_ec && std::filesystem::weakly_canonical(std::filesystem::absolute(in.path, in_ec), in_ec) == out_path && !in_ec;
    if (same) {
      return absl::InvalidArgumentError(absl::StrCat(
          output_flag, "=", output, " would write over ", in.flag,
          in.flag.rfind("--", 0) == 0 ? "=" : " ", in.path,
          in.path == output ? "" : " (the same file)", "; write the output elsewhere"));
    }
  }
  return absl::OkStatus();
}

int OpenOutput(const std::string& path, int flags) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISFIFO(st.st_mode)) {
    return ::open(path.c_str(), O_WRONLY | O_CLOEXEC | flags, 0666);  // less the umask, as any output
  }
  const absl::Time give_up = absl::Now() + kFifoReaderWait;
  int fd = -1;
  while ((fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | flags, 0666)) < 0 && errno == ENXIO &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

absl::Status CheckOutputWritable(absl::string_view flag, const std::string& path) {
  // A file called "-" is never what was meant: --json=- and --progress-file=- are stdout.
  if (path == "-") {
    return absl::InvalidArgumentError(absl::StrCat(flag, "=-: give a file name (this output has no stdout form)"));
  }
  struct stat st {};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  int err = 0;
  if (!existed && ::lstat(path.c_str(), &st) == 0) {
    // A link to nothing yet: creating and removing would create its target and remove the
    // user's link; the directory it points into must take the file.
    std::error_code ec;
    std::filesystem::path target = std::filesystem::read_symlink(path, ec);
    if (!ec && target.is_relative()) target = std::filesystem::path(path).parent_path() / target;
    const std::filesystem::path dir = ec || target.parent_path().empty() ? std::filesystem::path(".") : target.parent_path();
    if (::access(dir.c_str(), W_OK | X_OK) != 0) err = errno;
  } else if (existed && S_ISFIFO(st.st_mode)) {
    if (::access(path.c_str(), W_OK) != 0) err = errno;
  } else if (const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666); fd < 0) {
    err = errno;
  } else {
    ::close(fd);
    if (!existed) ::unlink(path.c_str());
  }
  if (err == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(flag, "=", path, ": cannot write: ", std::strerror(err)));
}

int WriteAll(int fd, absl::string_view text) {
  size_t written = 0;
  return WriteAllWithin(fd, text, absl::InfiniteDuration(), &written);
}

int WriteAllWithin(int fd, absl::string_view text, absl::Duration stall, size_t* written) {
  *written = 0;
  absl::Time until = absl::Now() + stall;
  while (*written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + *written, text.size() - *written);
    if (n > 0) {
      *written += static_cast<size_t>(n);
      until = absl::Now() + stall;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return n < 0 ? errno : ENOSPC;
    const absl::Duration left = until - absl::Now();
    if (left <= absl::ZeroDuration()) return ETIMEDOUT;
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left), 999) + 1));
  }
  return 0;
}

absl::Status WriteOutputFile(const std::string& path, absl::string_view text) {
  const int fd = OpenOutput(path, O_CREAT | O_TRUNC);
  if (fd < 0) return absl::InvalidArgumentError(absl::StrCat("cannot write: ", OpenOutputError(path, errno)));
  int err = WriteAll(fd, text);
  if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  if (err != 0) return absl::UnavailableError(absl::StrCat("cannot write: ", std::strerror(err)));
  return absl::OkStatus();
}

std::string OpenOutputError(const std::string& path, int err) {
  struct stat st {};
  if (err == ENXIO && ::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)) {
    return absl::StrCat("a named pipe no process reads (waited ", absl::FormatDuration(kFifoReaderWait), " for a reader)");
  }
  return std::strerror(err);
}

}  // namespace psbench
