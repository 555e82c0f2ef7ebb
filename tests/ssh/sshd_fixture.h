// A real sshd for launcher tests, owned by the test: its host key, a user key and its config
// live in a temp dir; it listens on 127.0.0.1 and a free port, accepts only that key, and is
// stopped with every session it started (and whatever those sessions run) on destruction.
//
// Works as root (CI): PermitRootLogin prohibit-password, StrictModes no (the temp dir is not
// root-only), UsePAM no (no PAM stack to configure).
#ifndef PSBENCH_TESTS_SSH_SSHD_FIXTURE_H_
#define PSBENCH_TESTS_SSH_SSHD_FIXTURE_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {

class Sshd {
 public:
  struct Options {
    std::string listen = "127.0.0.1";  // ListenAddress
    int port = 0;                      // 0: a free one
    Argv wrap;                         // prefixes sshd's command line (ip netns exec NS)
    Argv client_wrap;                  // prefixes the readiness check's ssh (where it can reach)
    // Reuse that sshd's host and user keys (it must outlive this one), so that one client
    // command logs in to every such "host".
    const Sshd* keys_from = nullptr;
  };
  // Makes the keys (or reuses them) and the config, starts `sshd -D -e -f CONFIG` and waits
  // until `ssh ... LISTEN true` succeeds (at most 30 s). Returns nullptr, after reporting a
  // test failure with the reason (sshd's own log included), when it does not come up.
  static std::unique_ptr<Sshd> Start(const Options& options);
  static std::unique_ptr<Sshd> Start() { return Start(Options{}); }
  ~Sshd();  // Stop()
  Sshd(const Sshd&) = delete;
  Sshd& operator=(const Sshd&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return process_->pid(); }
  const std::string& listen() const { return listen_; }
  // The client, one string for psbench ssh --ssh=: "ssh -F /dev/null -p PORT -i KEY -o ...".
  std::string SshCommand() const;
  // The same as an argv, then HOST and the remote command.
  Argv SshArgv(const std::string& host, const std::string& remote_command) const;

  // Every live process below sshd: its sessions and what they run.
  std::vector<ProcInfo> Sessions() const;
  // Kills the sessions (SIGKILL), then sshd (SIGTERM), and reaps them. Idempotent.
  void Stop();
  // sshd's stderr (-e: its log), for failure messages.
  std::string Log() const { return process_->Stderr(); }

 private:
  Sshd() = default;
  bool Prepare(const Sshd* keys_from, std::string* error);

  TempDir dir_;
  std::string host_key_, user_key_;
  std::string listen_;
  int port_ = 0;
  std::unique_ptr<Process> process_;
};

// Every live descendant of `root` (children first found, then theirs), read from /proc.
std::vector<ProcInfo> DescendantsOf(pid_t root);

}  // namespace psbench::testing

#endif  // PSBENCH_TESTS_SSH_SSHD_FIXTURE_H_
