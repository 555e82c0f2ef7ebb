// PS addresses the user gives (worker --ps, a scenario's "ps", the line a PS prints): one set
// of rules everywhere. HOST:PORT with IPv6 literals in brackets ([::1]:5000), a port in
// 1-65535, and a list that names every PS once after name resolution.
#ifndef PSBENCH_INPUTS_ADDRESS_H_
#define PSBENCH_INPUTS_ADDRESS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psbench {

struct HostPort {
  std::string host;  // without brackets: "::1", "10.0.0.1", "node7"
  int port = 0;
};

// Parses "HOST:PORT" or "[IPV6]:PORT". INVALID_ARGUMENT, naming `text`, for an empty host, a
// bare IPv6 literal ("::1:5000": which colon ends the address?), a port that is not a number
// in 1-65535, spaces or control characters.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text);

// "host:port", or "[host]:port" when host is an IPv6 literal: what ParseHostPort reads back.
std::string FormatHostPort(absl::string_view host, int port);

// Parses every entry of a PS list (`flag` names it in errors: "--ps").
absl::Status CheckPsListSyntax(const std::vector<std::string>& ps, absl::string_view flag);

// Resolves every entry of a PS list and refuses one PS listed twice: the same text twice, or
// two spellings that resolve to the same addresses (node7:P and 10.0.0.7:P). A name that does
// not exist is refused at once, naming it, instead of after the connect timeout. (Two names
// of a PS that serves several addresses are found once connected: its identity.)
absl::Status CheckPsListResolves(const std::vector<std::string>& ps, absl::string_view flag);

}  // namespace psbench

#endif  // PSBENCH_INPUTS_ADDRESS_H_
