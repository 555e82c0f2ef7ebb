#include "bench/memory_limit.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace psbench {
namespace {

// The files read here are a few lines; a garbled one is not read past this.
constexpr size_t kMaxFileBytes = 1 << 20;

bool ReadSmallFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(kMaxFileBytes, '\0');
  in.read(out->data(), static_cast<std::streamsize>(out->size()));
  out->resize(static_cast<size_t>(in.gcount()));
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

// mountinfo: "id parent major:minor root point options [optional...] - fstype source super".
// The cgroup2 mount, and the cgroup (v1) mount whose super options name the memory controller.
void FindMounts(const std::string& mountinfo, Mount* v2, Mount* v1_memory) {
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash < 6 || dash + 3 > f.size()) continue;
    const absl::string_view type = f[dash + 1];
    Mount m{std::string(f[4]), std::string(f[3])};
    if (type == "cgroup2" && v2->point.empty()) {
      *v2 = std::move(m);
    } else if (type == "cgroup" && v1_memory->point.empty()) {
      for (absl::string_view option : absl::StrSplit(f[dash + 3], ',')) {
        if (option == "memory") *v1_memory = std::move(m);
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
    dir.resize(std::max(slash, mount.point.size()));
  }
}

}  // namespace

MemoryLimit ProcessMemoryLimit(const std::string& root_in, uint64_t host_bytes) {
  const std::string root = root_in == "/" ? "" : root_in;
  MemoryLimit out;
  out.host_bytes = host_bytes > 0 ? host_bytes : HostBytes();
  out.bytes = out.host_bytes;
  out.source = "host";
  std::string cgroups, mountinfo;
  if (!ReadSmallFile(root + "/proc/self/cgroup", &cgroups) ||
      !ReadSmallFile(root + "/proc/self/mountinfo", &mountinfo)) {
    return out;
  }
  Mount v2, v1;
  FindMounts(mountinfo, &v2, &v1);
  // "hierarchy-id:controllers:path": "0::/path" for v2, "4:memory:/path" for v1's memory.
  for (absl::string_view line : absl::StrSplit(cgroups, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || f[2].empty() || f[2].front() != '/') continue;
    const bool is_v2 = f[0] == "0" && f[1].empty();
    bool is_memory = false;
    for (absl::string_view c : absl::StrSplit(f[1], ',')) is_memory |= c == "memory";
    const Mount& mount = is_v2 ? v2 : v1;
    if ((!is_v2 && !is_memory) || mount.point.empty()) continue;
    const std::string dir = CgroupDir(mount, f[2]);
    if (dir.empty()) continue;
    std::string where;
    uint64_t limit = out.bytes;
    Walk(root, mount, dir, is_v2 ? "memory.max" : "memory.limit_in_bytes", &limit, &where);
    if (limit < out.bytes) {
      out.bytes = limit;
      out.source = absl::StrCat(is_v2 ? "cgroup v2 " : "cgroup v1 memory ", where);
    }
  }
  return out;
}

}  // namespace psbench
