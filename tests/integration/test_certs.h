// Certificates for the TLS tests, made by the openssl command line into a temporary
// directory: a CA, a server certificate for 127.0.0.1 and localhost, a client certificate,
// both signed by that CA, and a second, unrelated CA.
#ifndef PSBENCH_TESTS_INTEGRATION_TEST_CERTS_H_
#define PSBENCH_TESTS_INTEGRATION_TEST_CERTS_H_

#include <unistd.h>

#include <cstdlib>
#include <string>

#include <sstream>

#include <gtest/gtest.h>

#include "tests/integration/run_helpers.h"

namespace psbench::testing {

class TestCerts {
 public:
  // Makes them; reports a test failure (and ok() is false) when openssl fails.
  TestCerts() {
    dir_.Write("ext.cnf",
               "[server]\nsubjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
               "[client]\nbasicConstraints=CA:FALSE\n");
    ok_ = MakeCa("ca") && MakeCa("other-ca") && MakeSigned("server", "server") &&
          MakeSigned("client", "client");
  }
  bool ok() const { return ok_; }
  std::string Path(const std::string& name) const { return dir_.File(name); }
  std::string ca() const { return Path("ca.pem"); }
  std::string other_ca() const { return Path("other-ca.pem"); }
  // --tls-cert/--tls-key of the PS, and with --tls-ca of the worker.
  Argv ServerFlags() const {
    return {"--tls-cert=" + Path("server.pem"), "--tls-key=" + Path("server.key")};
  }
  Argv ClientCertFlags() const {
    return {"--tls-cert=" + Path("client.pem"), "--tls-key=" + Path("client.key")};
  }
  const TempDir& dir() const { return dir_; }
  // The openssl command line with these arguments (argv[0] is replaced): whether it succeeded.
  bool Openssl(Argv argv) const { return Run(std::move(argv)); }

 private:
  // The child is exec'd without a PATH search: find openssl here.
  static std::string Openssl() {
    const char* path = std::getenv("PATH");
    std::istringstream dirs(path ? path : "/usr/bin:/bin");
    for (std::string dir; std::getline(dirs, dir, ':');) {
      std::string candidate = dir + "/openssl";
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return "openssl (not found on PATH)";
  }
  bool Run(Argv argv) const {
    argv[0] = Openssl();
    RunResult r = RunCommand(argv, seconds(60));
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    return r.exit_code == 0;
  }
  bool MakeCa(const std::string& name) {
    return Run({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                Path(name + ".key"), "-out", Path(name + ".pem"), "-days", "2", "-subj",
                "/CN=psbench test " + name});
  }
  bool MakeSigned(const std::string& name, const std::string& extensions) {
    return Run({"openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", Path(name + ".key"),
                "-out", Path(name + ".csr"), "-subj", "/CN=" + name}) &&
           Run({"openssl", "x509", "-req", "-in", Path(name + ".csr"), "-CA", ca(), "-CAkey",
                Path("ca.key"), "-CAcreateserial", "-out", Path(name + ".pem"), "-days", "2",
                "-extfile", Path("ext.cnf"), "-extensions", extensions});
  }

  TempDir dir_;
  bool ok_ = false;
};

}  // namespace psbench::testing

#endif  // PSBENCH_TESTS_INTEGRATION_TEST_CERTS_H_
