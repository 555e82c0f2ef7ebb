#include "bench/sysinfo.h"

#include "bench/memory_limit.h"
#include "bench/process/alloc_policy.h"
#include "bench/process/mutex_policy.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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
    // LO or LO-HI; "1-1-0" is neither (a pair would drop its third field).
    const std::vector<absl::string_view> range = absl::StrSplit(part, '-');
    int lo, hi;
    if (range.size() > 2 || !absl::SimpleAtoi(range[0], &lo) || lo < 0) return bad();
    if (range.size() == 1) {
      hi = lo;
    } else if (!absl::SimpleAtoi(range[1], &hi) || hi < lo) {
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

absl::StatusOr<std::string> ResolveListenAddress(absl::string_view spec_view) {
  std::string spec(spec_view);
  if (spec.empty()) return absl::InvalidArgumentError("--listen is empty; give an address or an interface");
  // [::1] as in HOST:PORT addresses (an IPv6 literal only).
  if (spec.size() > 2 && spec.front() == '[' && spec.back() == ']') {
    std::string inside = spec.substr(1, spec.size() - 2);
    in6_addr a{};
    if (inet_pton(AF_INET6, inside.c_str(), &a) == 1) return inside;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET, spec.c_str(), &v6) == 1 || inet_pton(AF_INET6, spec.c_str(), &v6) == 1) {
    return spec;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    std::string v4_address, v6_address;
    bool interface_exists = false;
    std::vector<std::string> names;
    for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_name == nullptr) continue;
      if (std::find(names.begin(), names.end(), a->ifa_name) == names.end()) names.push_back(a->ifa_name);
      if (spec != a->ifa_name) continue;
      interface_exists = true;
      if (a->ifa_addr == nullptr) continue;
      char text[INET6_ADDRSTRLEN] = {};
      if (a->ifa_addr->sa_family == AF_INET && v4_address.empty()) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
        v4_address = text;
      } else if (a->ifa_addr->sa_family == AF_INET6 && v6_address.empty()) {
        const in6_addr& addr = reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr;
        if (IN6_IS_ADDR_LINKLOCAL(&addr)) continue;  // needs a scope id: not dialable as is
        inet_ntop(AF_INET6, &addr, text, sizeof text);
        v6_address = text;
      }
    }
    freeifaddrs(list);
    if (interface_exists) {
      if (!v4_address.empty()) return v4_address;
      if (!v6_address.empty()) return v6_address;
      return absl::FailedPreconditionError(absl::StrCat(
          "--listen=", spec, ": interface ", spec, " has no IPv4 or global IPv6 address"));
    }
    // Not an interface: a host name, resolved below.
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(spec.c_str(), nullptr, &hints, &found) == 0 && found != nullptr) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* addr = found->ai_family == AF_INET
                             ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr)
                             : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(found->ai_addr)->sin6_addr);
      inet_ntop(found->ai_family, addr, text, sizeof text);
      freeaddrinfo(found);
      return std::string(text);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen=", spec, " is not an address, an interface of this host (",
        absl::StrJoin(names, ", "), ") or a resolvable host name"));
  }
  return absl::InternalError(absl::StrCat("--listen=", spec, ": getifaddrs: ", strerror(errno)));
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

namespace {
// The host's memory and what this process may use of it (a cgroup's limit, where one binds).
nlohmann::json MemoryJson() {
  const MemoryLimit limit = ProcessMemoryLimit();
  return {{"host_bytes", limit.host_bytes}, {"limit_bytes", limit.bytes}, {"limit_source", limit.source}};
}
}  // namespace

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
      {"allocator", AllocatorPolicy()},
      {"mutex_deadlock_detection", MutexDeadlockDetection()},
      {"memory", MemoryJson()},
  };
}

}  // namespace psbench
