// PS addresses: one parser for HOST:PORT and [IPV6]:PORT, and a PS list that names every PS
// once after name resolution.
#include "inputs/address.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psbench {
namespace {

using ::testing::HasSubstr;

TEST(AddressTest, ParsesHostPortAndBracketedIpv6) {
  struct Case {
    const char* text;
    const char* host;
    int port;
  };
  for (const Case& c : {Case{"127.0.0.1:5000", "127.0.0.1", 5000}, Case{"node7:1", "node7", 1},
                        Case{"[::1]:65535", "::1", 65535},
                        Case{"[fe80::1%eth0]:80", "fe80::1%eth0", 80},
                        Case{"ps-0.cluster.local:443", "ps-0.cluster.local", 443}}) {
    absl::StatusOr<HostPort> hp = ParseHostPort(c.text);
    ASSERT_TRUE(hp.ok()) << c.text << ": " << hp.status();
    EXPECT_EQ(hp->host, c.host);
    EXPECT_EQ(hp->port, c.port);
    EXPECT_EQ(FormatHostPort(hp->host, hp->port), c.text);
  }
}

TEST(AddressTest, RefusesWhatIsNotHostPortSayingWhy) {
  struct Case {
    const char* text;
    const char* why;
  };
  for (const Case& c : {Case{"", "empty"}, Case{"node7", "no :PORT"}, Case{":5000", "empty host"},
                        Case{"h:", "port '' is not in 1-65535"},
                        Case{"h:0", "port '0' is not in 1-65535"},
                        Case{"h:65536", "port '65536' is not in 1-65535"},
                        Case{"h:99999999999", "not in 1-65535"}, Case{"h:+5", "not in 1-65535"},
                        Case{"h:5x", "not in 1-65535"},
                        Case{"::1:5000", "write an IPv6 address in brackets: [::1]:5000"},
                        Case{"[::1:5000", "no ']'"}, Case{"[::1]5000", "no :PORT after ']'"},
                        Case{"[]:5000", "empty host"}, Case{"h]:5", "stray bracket"},
                        Case{"h 1:5", "spaces or control characters"},
                        // Taken, then failed when the worker connected; or a confusing hint.
                        Case{"[127.0.0.1]:5000", "brackets hold an IPv6 address only: write 127.0.0.1:5000"},
                        Case{"[node7]:5000", "brackets hold an IPv6 address only: write node7:5000"},
                        Case{"http://node7:5000", "no URL: write node7:5000 (without 'http://')"}}) {
    absl::StatusOr<HostPort> hp = ParseHostPort(c.text);
    ASSERT_FALSE(hp.ok()) << c.text;
    EXPECT_EQ(hp.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(hp.status().message(), HasSubstr(std::string("'") + c.text + "' is not HOST:PORT"));
    EXPECT_THAT(hp.status().message(), HasSubstr(c.why)) << c.text;
  }
}

TEST(AddressTest, ListSyntaxNamesTheFlagAndARepeat) {
  EXPECT_TRUE(CheckPsListSyntax({"a:1", "a:2", "[::1]:1"}, "--ps").ok());
  absl::Status s = CheckPsListSyntax({"a:1", "b"}, "--ps");
  EXPECT_EQ(s.message(), "--ps: 'b' is not HOST:PORT: no :PORT");
  s = CheckPsListSyntax({"a:1", "b:2", "a:1"}, "--ps");
  EXPECT_EQ(s.message(), "--ps lists a:1 twice; list each PS once");
}

TEST(AddressTest, TwoSpellingsOfOnePsAreRefusedNamingBoth) {
  EXPECT_TRUE(CheckPsListResolves({"127.0.0.1:5000", "127.0.0.1:5001", "[::1]:5000"}, "--ps").ok());
  // 127.1 is 127.0.0.1 (inet_aton's short form).
  absl::Status s = CheckPsListResolves({"127.0.0.1:5000", "127.1:5000"}, "--ps");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--ps: 127.0.0.1:5000 and 127.1:5000 are the same PS (both "
                         "127.0.0.1:5000); list each PS once");
  // localhost may be 127.0.0.1 and ::1, which can be two PS: left to the PS's identity.
  EXPECT_TRUE(CheckPsListResolves({"localhost:5000", "[::1]:5000"}, "--ps").ok());
}

TEST(AddressTest, ANameThatDoesNotResolveIsNamed) {
  // .invalid never resolves (RFC 6761).
  absl::Status s = CheckPsListResolves({"127.0.0.1:5000", "no-such-ps.invalid:5000"}, "--ps");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--ps: 'no-such-ps.invalid:5000': cannot resolve no-such-ps.invalid"));
}

}  // namespace
}  // namespace psbench
