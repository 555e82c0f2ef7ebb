// Facts about this process and machine that every report carries: CPU time, placement,
// host and versions.
#ifndef PSBENCH_BENCH_SYSINFO_H_
#define PSBENCH_BENCH_SYSINFO_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace psbench {

struct CpuTimes {
  double user_s = 0;
  double system_s = 0;
  double total() const { return user_s + system_s; }
};
CpuTimes ProcessCpuTimes();  // whole process, all threads

// Parses a CPU list such as "0", "0-3", "1,3,5-6".
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text);
// Pins the whole process (threads created later inherit it). Errors name --cpu.
absl::Status PinProcess(absl::string_view cpu_list);
std::string CurrentAffinity();  // as a CPU list, e.g. "0-1"
int LastCpu();                  // the CPU the calling thread runs on now

std::string HostName();
// The address a PS listens on, from --listen: an IPv4 or IPv6 literal (0.0.0.0 or :: for every
// interface), the name of a network interface (ib0, eth0: its first IPv4 address, else its
// first global IPv6 one), or a host name (its first address). Errors say which of them failed.
absl::StatusOr<std::string> ResolveListenAddress(absl::string_view spec);
std::string PsbenchVersion();
// Host, kernel, CPU model, core count, versions of psbench, gRPC, protobuf and the compiler.
nlohmann::json Environment();

}  // namespace psbench

#endif  // PSBENCH_BENCH_SYSINFO_H_
