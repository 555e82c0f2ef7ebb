#include "bench/memory_limit.h"

#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "inputs/input_file.h"

namespace psbench {
namespace {

// The files read here are a few lines; mountinfo on a host of many mounts can be long.
constexpr uint64_t kMaxFileBytes = uint64_t{16} << 20;

// The file's text, or false when it cannot be read whole (missing, not a regular file, too big).
bool ReadSmallFile(const std::string& path, std::string* out) {
  absl::StatusOr<std::string> text = ReadInputFile(path, "cgroup file", kMaxFileBytes, "");
  if (!text.ok()) return false;
  *out = *std::move(text);
  return true;
}

uint64_t HostBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return uint64_t{16} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

// A cgroup hierarchy mounted here: where, and which of its cgroups is at the mount point (a
// container sees its own cgroup as the root of the mount).
struct Mount {
  std::string point;
  std::string root;
};

// mountinfo escapes a space, tab, newline and backslash in a path as \ooo (octal).
std::string Unescape(absl::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() &&
        field.substr(i + 1, 3).find_first_not_of("01234567") == absl::string_view::npos) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

// mountinfo: "id parent major:minor root point options [optional...] - fstype source super".
// Every cgroup2 mount, and every cgroup (v1) mount whose super options name the memory
// controller.
void FindMounts(const std::string& mountinfo, std::vector<Mount>* v2, std::vector<Mount>* v1_memory) {
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash < 6 || dash + 4 > f.size()) continue;  // a line cut short, or not one
    const absl::string_view type = f[dash + 1];
    Mount m{Unescape(f[4]), Unescape(f[3])};
    if (type == "cgroup2") {
      v2->push_back(std::move(m));
    } else if (type == "cgroup") {
      for (absl::string_view option : absl::StrSplit(f[dash + 3], ',')) {
        if (option == "memory") {
          v1_memory->push_back(std::move(m));
          break;
        }
      }
    }
  }
}

// The directory of cgroup `path` under `mount`, or "" when the path lies outside the mount.
std::string CgroupDir(const Mount& mount, absl::string_view path) {
  absl::string_view rest = path;
  if (mount.root != "/" && !absl::ConsumePrefix(&rest, mount.root)) return "";
  if (!rest.empty() && rest.front() != '/') return "";
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  return absl::StrCat(mount.point, rest);
}

// Of the mounts that hold `path` (a hierarchy may be mounted more than once), the one
// mounting the highest cgroup: it shows the most of the path's ancestors, whose limits bind
// too. Null when none holds it.
const Mount* MountOf(const std::vector<Mount>& mounts, absl::string_view path) {
  const Mount* best = nullptr;
  for (const Mount& m : mounts) {
    if (CgroupDir(m, path).empty()) continue;
    if (best == nullptr || m.root.size() < best->root.size()) best = &m;
  }
  return best;
}

// The smallest limit in `file` of the cgroup at `dir` and of those above it up to the mount
// point, and which cgroup has it (its path below the mount point); unlimited values
// ("max", or v1's page-counter maximum) and unreadable files are no limit.
void Walk(const std::string& root, const Mount& mount, std::string dir, const char* file,
          uint64_t* best, std::string* where) {
  while (true) {
    std::string text;
    uint64_t value = 0;
    if (ReadSmallFile(absl::StrCat(root, dir, "/", file), &text) &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value) && value < *best) {
      *best = value;
      // Named as /proc/self/cgroup names it: the mount's root, then the path below it.
      const absl::string_view below = absl::string_view(dir).substr(mount.point.size());
      *where = mount.root == "/" ? std::string(below) : absl::StrCat(mount.root, below);
      if (where->empty()) *where = "/";
    }
    if (dir.size() <= mount.point.size()) return;
    const size_t slash = dir.rfind('/');
    if (slash == std::string::npos || slash < mount.point.size()) return;
    dir.resize(slash);
  }
}

MemoryLimit ReadMemoryLimit(const std::string& root, uint64_t host_bytes) {
  MemoryLimit out;
  out.host_bytes = host_bytes > 0 ? host_bytes : HostBytes();
  out.bytes = out.host_bytes;
  out.source = "host";
  std::string cgroups, mountinfo;
  if (!ReadSmallFile(root + "/proc/self/cgroup", &cgroups) ||
      !ReadSmallFile(root + "/proc/self/mountinfo", &mountinfo)) {
    return out;
  }
  std::vector<Mount> v2, v1;
  FindMounts(mountinfo, &v2, &v1);
  // "hierarchy-id:controllers:path": "0::/path" for v2, "4:memory:/path" for v1's memory.
  for (absl::string_view line : absl::StrSplit(cgroups, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || f[2].empty() || f[2].front() != '/') continue;
    // A cgroup outside this namespace's view ("/../x"): nothing under the mount to read.
    if (absl::StrContains(absl::StrCat(f[2], "/"), "/../")) continue;
    const bool is_v2 = f[0] == "0" && f[1].empty();
    bool is_memory = false;
    for (absl::string_view c : absl::StrSplit(f[1], ',')) is_memory |= c == "memory";
    if (!is_v2 && !is_memory) continue;
    const Mount* mount = MountOf(is_v2 ? v2 : v1, f[2]);
    if (mount == nullptr) continue;
    std::string where;
    uint64_t limit = out.bytes;
    Walk(root, *mount, CgroupDir(*mount, f[2]), is_v2 ? "memory.max" : "memory.limit_in_bytes", &limit, &where);
    if (limit < out.bytes) {
      out.bytes = limit;
      out.source = absl::StrCat(is_v2 ? "cgroup v2 " : "cgroup v1 memory ", where);
    }
  }
  return out;
}

}  // namespace

MemoryLimit ProcessMemoryLimit(const std::string& root, uint64_t host_bytes) {
  if (root != "/" || host_bytes != 0) return ReadMemoryLimit(root, host_bytes);
  // This process's own: read once (every Plans() call asks, a fuzz target millions of times).
  static const MemoryLimit kOwn = ReadMemoryLimit("", 0);
  return kOwn;
}

}  // namespace psbench
