// Several "hosts" on one machine: network namespaces on one Ethernet segment, so psbench
// processes reach each other over real interfaces and addresses that are not loopback, and a
// link can be slowed down (tc) or cut to check what the benchmark sees.
//
// Topology: a star. Host i is the namespace <prefix>-<pid>-h<i> with eth0 = 10.201.0.<i+1>/24;
// its veth peer "h<i>" is a port of bridge br0 in the "switch" namespace <prefix>-<pid>-sw.
// A star rather than one veth pair per PS-worker couple: every host has one address that every
// other host reaches, as on a cluster, hosts can be added without wiring N x M pairs, and one
// host's link (both of its directions) can be shaped or cut without touching the others.
//
// Needs root (CI runs as root). Everything is deleted on destruction; namespaces that a
// crashed run left behind (owner pid gone) are deleted when the next one starts.
#ifndef PSBENCH_TESTS_NETNS_NETNS_HOSTS_H_
#define PSBENCH_TESTS_NETNS_NETNS_HOSTS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {

// How to slow a link down. rate alone uses tbf (in every kernel); a delay needs netem.
struct LinkShape {
  std::string rate;   // tc units: "100mbit"; empty: unlimited
  std::string delay;  // tc units: "5ms"; empty: none
};

class NetnsHosts {
 public:
  static constexpr char kDefaultPrefix[] = "psbench";

  // Creates `hosts` hosts and the switch, brings every link and lo up and checks that every
  // host reaches host 0. Returns nullptr, after reporting a test failure with the reason,
  // when that fails.
  static std::unique_ptr<NetnsHosts> Create(int hosts, const std::string& prefix = kDefaultPrefix);
  ~NetnsHosts();  // deletes every namespace it made (their veths and the bridge go with them)
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  int size() const { return hosts_; }
  std::string Namespace(int host) const;  // <prefix>-<pid>-h<host>
  std::string SwitchNamespace() const;    // <prefix>-<pid>-sw
  std::string Address(int host) const;    // 10.201.0.<host+1>
  // The namespaces this object made: the switch first, then the hosts.
  std::vector<std::string> Namespaces() const;

  // `argv` run inside host's namespace (ip netns exec, which execs it: same pid).
  Argv Exec(int host, const Argv& argv) const;

  // Shapes both directions of host's link: its eth0 (what it sends) and its switch port (what
  // it receives). Returns "" or why not; the reason starts with "no netem:" when the kernel
  // lacks sch_netem (callers skip).
  std::string Shape(int host, const LinkShape& shape);
  // Takes host's switch port down or up: a cut cable, the host itself sees no error.
  bool SetLinkUp(int host, bool up);
  // Whether a TCP SYN from `from` to `to` is answered (by a reset: nothing listens on port 9)
  // within `timeout`.
  bool Reachable(int from, const std::string& to_address,
                 std::chrono::milliseconds timeout = std::chrono::seconds(2)) const;

  // Every namespace named <prefix>-<pid>-... (any pid), as `ip netns list` shows them.
  static std::vector<std::string> List(const std::string& prefix = kDefaultPrefix);
  // Deletes those whose <pid> is not a live process. Returns the names deleted.
  static std::vector<std::string> RemoveStale(const std::string& prefix = kDefaultPrefix);
  // The owner pid of a namespace name of that prefix, or -1.
  static pid_t OwnerOf(const std::string& name, const std::string& prefix = kDefaultPrefix);

 private:
  NetnsHosts(int hosts, std::string prefix);
  bool Run(const Argv& argv, std::string* error) const;  // ip/tc, bounded
  std::string Base() const;                              // <prefix>-<pid>

  int hosts_;
  std::string prefix_;
  pid_t owner_;
  std::vector<std::string> made_;  // in creation order
};

// ip and tc, wherever Debian puts them.
std::string IpBinary();
std::string TcBinary();

}  // namespace psbench::testing

#endif  // PSBENCH_TESTS_NETNS_NETNS_HOSTS_H_
