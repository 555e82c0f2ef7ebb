#include "bench/sysinfo.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <google/protobuf/stubs/common.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#include "psbench_version.h"

namespace psbench {

CpuTimes ProcessCpuTimes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return {secs(ru.ru_utime), secs(ru.ru_stime)};
}

absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text) {
  std::vector<int> cpus;
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpu=", text, " is not a CPU list (examples: 0, 0-3, 1,3,5-6)"));
  };
  if (text.empty()) return bad();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(part, '-');
    int lo, hi;
    if (!absl::SimpleAtoi(range.first, &lo) || lo < 0) return bad();
    if (part.find('-') == absl::string_view::npos) {
      hi = lo;
    } else if (!absl::SimpleAtoi(range.second, &hi) || hi < lo) {
      return bad();
    }
    if (hi >= CPU_SETSIZE) return bad();
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  return cpus;
}

absl::Status PinProcess(absl::string_view cpu_list) {
  auto cpus = ParseCpuList(cpu_list);
  if (!cpus.ok()) return cpus.status();
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : *cpus) {
    if (c >= online) {
      return absl::InvalidArgumentError(absl::StrCat("--cpu=", cpu_list, ": CPU ", c,
                                                     " does not exist (this machine has ",
                                                     online, ": 0-", online - 1, ")"));
    }
    CPU_SET(c, &set);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpu=", cpu_list, ": cannot pin the process: ", strerror(errno)));
  }
  return absl::OkStatus();
}

std::string CurrentAffinity() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return "?";
  std::vector<std::string> parts;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int end = c;
    while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set)) ++end;
    parts.push_back(end == c ? absl::StrCat(c) : absl::StrCat(c, "-", end));
    c = end;
  }
  return absl::StrJoin(parts, ",");
}

int LastCpu() { return sched_getcpu(); }

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

std::string PsbenchVersion() { return PSBENCH_VERSION; }

static std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "model name")) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return std::string(absl::StripAsciiWhitespace(line.substr(pos + 1)));
    }
  }
  return "unknown";
}

nlohmann::json Environment() {
  utsname u{};
  uname(&u);
  return {
      {"host", HostName()},
      {"kernel", absl::StrCat(u.sysname, " ", u.release)},
      {"cpu_model", CpuModel()},
      {"online_cpus", sysconf(_SC_NPROCESSORS_ONLN)},
      {"versions",
       {{"psbench", PsbenchVersion()},
        {"grpc", grpc::Version()},
        {"protobuf", google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION)},
        {"compiler", absl::StrCat("g++ ", __VERSION__)}}},
  };
}

}  // namespace psbench
