#include "inputs/address.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psbench {
namespace {

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not HOST:PORT: ", why));
}

bool PrintableWithoutSpaces(absl::string_view s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return c > ' ' && c < 0x7f; });
}

// The numeric addresses `hp` resolves to, as "address port" strings.
absl::StatusOr<std::set<std::string>> Resolve(const HostPort& hp) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  const std::string port = absl::StrCat(hp.port);
  if (int rc = getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &list); rc != 0) {
    // Only a definite "no such name" is the user's; a resolver that timed out or failed
    // (EAI_AGAIN, EAI_SYSTEM) may answer later: connecting reports it then.
    if (rc == EAI_NONAME || rc == EAI_FAIL || rc == EAI_NODATA) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot resolve ", hp.host, " (", gai_strerror(rc), ")"));
    }
    return std::set<std::string>{};
  }
  std::set<std::string> out;
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
    char host[NI_MAXHOST] = {};
    if (getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0) {
      out.insert(FormatHostPort(host, hp.port));
    }
  }
  freeaddrinfo(list);
  return out;
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text) {
  if (text.empty()) return Bad(text, "empty");
  if (!PrintableWithoutSpaces(text)) return Bad(text, "spaces or control characters");
  if (size_t scheme = text.find("://"); scheme != absl::string_view::npos) {
    return Bad(text, absl::StrCat("no URL: write ", text.substr(scheme + 3), " (without '", text.substr(0, scheme + 3), "')"));
  }
  HostPort hp;
  absl::string_view port;
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) return Bad(text, "no ']' after the IPv6 address");
    hp.host = std::string(text.substr(1, close - 1));
    if (hp.host.empty()) return Bad(text, "empty host");
    if (hp.host.find('[') != std::string::npos) return Bad(text, "stray bracket");
    absl::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return Bad(text, "no :PORT after ']'");
    port = rest.substr(1);
    // gRPC reads brackets as an IPv6 literal: [127.0.0.1] or [name] passed here and failed
    // only when the worker connected.
    if (hp.host.find(':') == std::string::npos) {
      return Bad(text, absl::StrCat("brackets hold an IPv6 address only: write ", hp.host, ":", port));
    }
  } else {
    size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return Bad(text, "no :PORT");
    hp.host = std::string(text.substr(0, colon));
    if (hp.host.empty()) return Bad(text, "empty host");
    if (hp.host.find(':') != std::string::npos) {
      return Bad(text, absl::StrCat("write an IPv6 address in brackets: [", hp.host, "]:",
                                    text.substr(colon + 1)));
    }
    if (hp.host.find_first_of("[]") != std::string::npos) return Bad(text, "stray bracket");
    port = text.substr(colon + 1);
  }
  if (port.empty() || !std::all_of(port.begin(), port.end(), absl::ascii_isdigit) ||
      port.size() > 5 || !absl::SimpleAtoi(port, &hp.port) || hp.port < 1 || hp.port > 65535) {
    return Bad(text, absl::StrCat("port '", port, "' is not in 1-65535"));
  }
  return hp;
}

std::string FormatHostPort(absl::string_view host, int port) {
  return host.find(':') != absl::string_view::npos ? absl::StrCat("[", host, "]:", port)
                                                   : absl::StrCat(host, ":", port);
}

absl::Status CheckPsListSyntax(const std::vector<std::string>& ps, absl::string_view flag) {
  std::set<std::string> seen;
  for (const std::string& a : ps) {
    if (auto hp = ParseHostPort(a); !hp.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", hp.status().message()));
    }
    if (!seen.insert(a).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " lists ", a, " twice; list each PS once"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPsListResolves(const std::vector<std::string>& ps, absl::string_view flag) {
  if (absl::Status s = CheckPsListSyntax(ps, flag); !s.ok()) return s;
  // Two entries are one PS when they resolve to the same addresses. Sets that only overlap
  // (localhost: 127.0.0.1 and ::1) may still be two PS, as gRPC dials one address of each;
  // the PS's own identity, checked once connected, settles those.
  std::map<std::set<std::string>, std::string> owner;  // resolved addresses -> their entry
  for (const std::string& a : ps) {
    absl::StatusOr<std::set<std::string>> resolved = Resolve(*ParseHostPort(a));
    if (!resolved.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": '", a, "': ", resolved.status().message()));
    }
    if (resolved->empty()) continue;
    auto [it, inserted] = owner.emplace(*resolved, a);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": ", it->second, " and ", a, " are the same PS (both ",
                       absl::StrJoin(*resolved, ", "), "); list each PS once"));
    }
  }
  return absl::OkStatus();
}

}  // namespace psbench
