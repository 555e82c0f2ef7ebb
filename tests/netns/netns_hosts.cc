#include "tests/netns/netns_hosts.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <regex>
#include <thread>

namespace psbench::testing {
namespace {

// Where `ip netns add` mounts its namespaces (iproute2's NETNS_RUN_DIR).
constexpr char kNetnsDir[] = "/run/netns";

std::string FirstExisting(std::initializer_list<const char*> paths) {
  for (const char* p : paths) {
    if (access(p, X_OK) == 0) return p;
  }
  return *paths.begin();
}

}  // namespace

std::string IpBinary() { return FirstExisting({"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}); }
std::string TcBinary() { return FirstExisting({"/usr/sbin/tc", "/sbin/tc", "/usr/bin/tc"}); }

NetnsHosts::NetnsHosts(int hosts, std::string prefix)
    : hosts_(hosts), prefix_(std::move(prefix)), owner_(getpid()) {}

std::string NetnsHosts::Base() const { return prefix_ + "-" + std::to_string(owner_); }
std::string NetnsHosts::SwitchNamespace() const { return Base() + "-sw"; }
std::string NetnsHosts::Namespace(int host) const { return Base() + "-h" + std::to_string(host); }
std::string NetnsHosts::Address(int host) const { return "10.201.0." + std::to_string(host + 1); }
std::vector<std::string> NetnsHosts::Namespaces() const { return made_; }

Argv NetnsHosts::Exec(int host, const Argv& argv) const {
  return Concat({IpBinary(), "netns", "exec", Namespace(host)}, argv);
}

bool NetnsHosts::Run(const Argv& argv, std::string* error) const {
  RunResult r = RunCommand(argv, std::chrono::seconds(20));
  if (r.exit_code == 0) return true;
  if (error != nullptr) *error = r.Describe();
  return false;
}

std::unique_ptr<NetnsHosts> NetnsHosts::Create(int hosts, const std::string& prefix) {
  if (hosts < 1 || hosts > 200) {
    ADD_FAILURE() << "NetnsHosts: " << hosts << " hosts (1-200)";
    return nullptr;
  }
  RemoveStale(prefix);
  std::unique_ptr<NetnsHosts> n(new NetnsHosts(hosts, prefix));
  const std::string ip = IpBinary(), sw = n->SwitchNamespace();
  std::string error;
  auto step = [&](const Argv& argv) {
    if (n->Run(argv, &error)) return true;
    ADD_FAILURE() << "NetnsHosts: setting up " << hosts << " hosts failed:\n" << error;
    return false;
  };
  // Recorded before the command: a namespace half made is still deleted.
  auto add_namespace = [&](const std::string& name) {
    n->made_.push_back(name);
    return step({ip, "netns", "add", name}) && step({ip, "-n", name, "link", "set", "lo", "up"});
  };
  if (!add_namespace(sw) || !step({ip, "-n", sw, "link", "add", "br0", "type", "bridge"}) ||
      !step({ip, "-n", sw, "link", "set", "br0", "up"})) {
    return nullptr;
  }
  for (int i = 0; i < hosts; ++i) {
    const std::string ns = n->Namespace(i), port = "h" + std::to_string(i);
    // Both ends are made inside namespaces of this run, so no name can clash with another run.
    if (!add_namespace(ns) ||
        !step({ip, "-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns}) ||
        !step({ip, "-n", sw, "link", "set", port, "master", "br0"}) ||
        !step({ip, "-n", sw, "link", "set", port, "up"}) ||
        !step({ip, "-n", ns, "addr", "add", n->Address(i) + "/24", "dev", "eth0"}) ||
        !step({ip, "-n", ns, "link", "set", "eth0", "up"})) {
      return nullptr;
    }
  }
  // Links come up asynchronously: give every host a few seconds to reach host 0, and host 0
  // the last host.
  std::vector<std::pair<int, int>> checks;
  for (int i = 1; i < hosts; ++i) checks.emplace_back(i, 0);
  if (hosts > 1) checks.emplace_back(0, hosts - 1);
  for (const auto& [from, to] : checks) {
    auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!n->Reachable(from, n->Address(to), std::chrono::milliseconds(500))) {
      if (Clock::now() > deadline) {
        ADD_FAILURE() << "NetnsHosts: host " << from << " (" << n->Namespace(from)
                      << ") does not reach " << n->Address(to);
        return nullptr;
      }
    }
  }
  return n;
}

NetnsHosts::~NetnsHosts() {
  // Hosts first, the switch last; a namespace's veths and bridge go with it.
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
    std::string error;
    if (!Run({IpBinary(), "netns", "delete", *it}, &error) &&
        std::filesystem::exists(std::string(kNetnsDir) + "/" + *it)) {
      ADD_FAILURE() << "NetnsHosts: cannot delete namespace " << *it << ":\n" << error;
    }
  }
}

std::string NetnsHosts::Shape(int host, const LinkShape& shape) {
  const std::string tc = TcBinary();
  Argv qdisc;
  if (shape.delay.empty()) {
    if (shape.rate.empty()) return "nothing to shape";
    // tbf: a token bucket, in every kernel. A small burst so that the rate holds even over
    // short measurements; a 100 ms queue so that a full window waits instead of being dropped.
    qdisc = {"tbf", "rate", shape.rate, "burst", "32kb", "latency", "100ms"};
  } else {
    qdisc = {"netem", "delay", shape.delay, "limit", "100000"};
    if (!shape.rate.empty()) qdisc.insert(qdisc.end(), {"rate", shape.rate});
  }
  // Its eth0 shapes what the host sends; its switch port what the host receives.
  for (const auto& [ns, dev] : {std::pair{Namespace(host), std::string("eth0")},
                                std::pair{SwitchNamespace(), "h" + std::to_string(host)}}) {
    RunResult r = RunCommand(Concat({tc, "-n", ns, "qdisc", "replace", "dev", dev, "root"}, qdisc),
                             std::chrono::seconds(20));
    if (r.exit_code != 0) {
      bool unknown = r.err.find("qdisc kind is unknown") != std::string::npos;
      return (unknown && qdisc[0] == "netem" ? "no netem: this kernel lacks sch_netem; " : "") +
             r.Describe();
    }
  }
  return "";
}

bool NetnsHosts::SetLinkUp(int host, bool up) {
  std::string error;
  bool ok = Run({IpBinary(), "-n", SwitchNamespace(), "link", "set", "h" + std::to_string(host),
                 up ? "up" : "down"},
                &error);
  if (!ok) ADD_FAILURE() << error;
  return ok;
}

bool NetnsHosts::Reachable(int from, const std::string& to_address,
                           std::chrono::milliseconds timeout) const {
  // A child enters the namespace (setns affects only the calling thread's process, and this
  // process must stay where it is) and reports through its exit status.
  int ns = open((std::string(kNetnsDir) + "/" + Namespace(from)).c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(9);  // discard: nothing listens, so a reachable host answers with a reset
  if (inet_pton(AF_INET, to_address.c_str(), &addr.sin_addr) != 1) {
    close(ns);
    return false;
  }
  const int wait_ms = static_cast<int>(timeout.count());
  pid_t child = fork();
  if (child == 0) {
    if (setns(ns, CLONE_NEWNET) != 0) _exit(3);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) _exit(3);
    int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    if (rc == 0) _exit(0);
    if (errno == ECONNREFUSED) _exit(0);
    if (errno != EINPROGRESS) _exit(1);
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, wait_ms) != 1) _exit(1);
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    _exit(err == 0 || err == ECONNREFUSED ? 0 : 1);
  }
  close(ns);
  if (child < 0) return false;
  int status = 0;
  auto deadline = Clock::now() + timeout + std::chrono::seconds(2);
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!WIFEXITED(status)) return false;
  // Refused at once by a missing route: wait out the timeout like a lost SYN would, so that
  // callers retrying in a loop do not spin.
  if (WEXITSTATUS(status) != 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return WEXITSTATUS(status) == 0;
}

std::vector<std::string> NetnsHosts::List(const std::string& prefix) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(kNetnsDir, ec)) {
    std::string name = e.path().filename().string();
    if (OwnerOf(name, prefix) > 0) names.push_back(name);
  }
  return names;
}

pid_t NetnsHosts::OwnerOf(const std::string& name, const std::string& prefix) {
  const std::string head = prefix + "-";
  if (name.rfind(head, 0) != 0) return -1;
  size_t end = name.find('-', head.size());
  if (end == std::string::npos || end == head.size()) return -1;
  std::string digits = name.substr(head.size(), end - head.size());
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) return -1;
  return static_cast<pid_t>(std::stol(digits));
}

std::vector<std::string> NetnsHosts::RemoveStale(const std::string& prefix) {
  std::vector<std::string> removed;
  for (const std::string& name : List(prefix)) {
    pid_t owner = OwnerOf(name, prefix);
    // kill(pid, 0) fails with ESRCH only when no such process exists (a zombie still counts
    // as its parent's business, so treat it as alive).
    if (kill(owner, 0) == 0 || errno != ESRCH) continue;
    RunResult r = RunCommand({IpBinary(), "netns", "delete", name}, std::chrono::seconds(20));
    if (r.exit_code == 0) removed.push_back(name);
  }
  return removed;
}

}  // namespace psbench::testing
