#include "tests/ssh/sshd_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <thread>

namespace psbench::testing {
namespace {

constexpr char kSshd[] = "/usr/sbin/sshd";
constexpr char kSsh[] = "/usr/bin/ssh";
constexpr char kSshKeygen[] = "/usr/bin/ssh-keygen";

// A port nothing listens on right now (bound, then released: sshd binds it a moment later;
// Start retries on the rare clash).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) close(fd);
  return port;
}

}  // namespace

std::vector<ProcInfo> DescendantsOf(pid_t root) {
  std::vector<ProcInfo> out;
  std::vector<pid_t> frontier = {root};
  std::set<pid_t> seen = {root};
  while (!frontier.empty()) {
    pid_t p = frontier.back();
    frontier.pop_back();
    for (ProcInfo& c : ChildrenOf(p)) {
      if (c.state == 'Z' || !seen.insert(c.pid).second) continue;
      frontier.push_back(c.pid);
      out.push_back(std::move(c));
    }
  }
  return out;
}

bool Sshd::Prepare(const Sshd* keys_from, std::string* error) {
  // sshd's privilege separation needs this directory; a fresh machine may not have it yet.
  if (mkdir("/run/sshd", 0755) != 0 && errno != EEXIST) {
    *error = std::string("mkdir /run/sshd: ") + std::strerror(errno);
    return false;
  }
  if (keys_from != nullptr) {
    host_key_ = keys_from->host_key_;
    user_key_ = keys_from->user_key_;
  } else {
    host_key_ = dir_.File("host_key");
    user_key_ = dir_.File("user_key");
    for (const std::string& key : {host_key_, user_key_}) {
      RunResult r = RunCommand(
          {kSshKeygen, "-q", "-t", "ed25519", "-N", "", "-C", "psbench-test", "-f", key}, seconds(30));
      if (r.exit_code != 0) {
        *error = r.Describe();
        return false;
      }
    }
  }
  dir_.Write("authorized_keys", ReadFile(user_key_ + ".pub"));
  return true;
}

std::unique_ptr<Sshd> Sshd::Start(const Options& options) {
  std::unique_ptr<Sshd> s(new Sshd);
  s->listen_ = options.listen;
  std::string error;
  if (!s->Prepare(options.keys_from, &error)) {
    ADD_FAILURE() << "Sshd: cannot make keys:\n" << error;
    return nullptr;
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    s->port_ = options.port != 0 ? options.port : FreePort();
    std::string config = s->dir_.Write(
        "sshd_config",
        "Port " + std::to_string(s->port_) + "\nListenAddress " + options.listen + "\nHostKey " +
            s->host_key_ + "\nAuthorizedKeysFile " + s->dir_.File("authorized_keys") +
            "\nPidFile " + s->dir_.File("sshd.pid") +
            "\nPermitRootLogin prohibit-password\nPubkeyAuthentication yes\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nStrictModes no\n"
            "UsePAM no\nPrintMotd no\nPrintLastLog no\nX11Forwarding no\nAllowTcpForwarding no\n"
            "MaxStartups 64\nMaxSessions 64\nLogLevel INFO\n");
    s->process_ = std::make_unique<Process>(Concat(options.wrap, {kSshd, "-D", "-e", "-f", config}));
    // Up when a client gets in: that proves the port, the host key and the user key.
    auto deadline = Clock::now() + seconds(30);
    while (Clock::now() < deadline && s->process_->Running()) {
      RunResult r = RunCommand(Concat(options.client_wrap, s->SshArgv(options.listen, "true")), seconds(20));
      if (r.exit_code == 0) return s;
      error = r.Describe();
      std::this_thread::sleep_for(milliseconds(100));
    }
    if (s->process_->Running()) break;  // up but refusing us: retrying will not help
    if (options.port != 0 || s->Log().find("Address already in use") == std::string::npos) break;
  }
  ADD_FAILURE() << "Sshd: not usable on " << options.listen << ":" << s->port_ << "\n--- sshd ---\n"
                << s->Log() << "\n--- last ssh ---\n"
                << error;
  s->Stop();
  return nullptr;
}

Sshd::~Sshd() { Stop(); }

std::string Sshd::SshCommand() const {
  std::string out;
  Argv argv = SshArgv("", "");
  argv.resize(argv.size() - 2);  // no host, no command
  // Joined by spaces, no quoting: psbench ssh splits --ssh on spaces, and no argument here
  // holds one (the temp dir's path has none).
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

Argv Sshd::SshArgv(const std::string& host, const std::string& remote_command) const {
  // -F /dev/null: no user or system client config can change what the test runs.
  return {kSsh, "-F", "/dev/null", "-p", std::to_string(port_), "-i", user_key_,
          "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
          "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10",
          host, remote_command};
}

std::vector<ProcInfo> Sshd::Sessions() const {
  return process_ ? DescendantsOf(process_->pid()) : std::vector<ProcInfo>{};
}

void Sshd::Stop() {
  if (!process_) return;
  // Sessions first: sshd -D does not take its sessions down when it exits. A session may
  // fork while we look, so look again until nothing is left.
  for (int round = 0; round < 20; ++round) {
    std::vector<ProcInfo> left = Sessions();
    if (left.empty()) break;
    for (const ProcInfo& p : left) kill(p.pid, SIGKILL);
    std::this_thread::sleep_for(milliseconds(20));
  }
  process_->Stop(SIGTERM, seconds(5));
  process_.reset();
}

}  // namespace psbench::testing
