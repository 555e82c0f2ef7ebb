#include "bench/cli.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/hdr_text.h"
#include "bench/sysinfo.h"
#include "fmt/core.h"

ABSL_FLAG(bool, fatal_line, false,
          "print a fatal error on stdout as \"#fatal CODE MESSAGE\" instead of on stderr (how "
          "psbench's launchers bring a PS's or worker's own words back, on every launcher)");

namespace psbench {

void ExitWhenStdinCloses() {
  std::thread([] {
    char buf[256];
    while (true) {
      ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EINTR)) break;
    }
    kill(getpid(), SIGTERM);
  }).detach();
}

namespace {

std::set<std::string, std::less<>>& SetFlags() {
  static auto* set = new std::set<std::string, std::less<>>;
  return *set;
}

// Whether `flag` is one of those `flag_files` names: "FILE" takes every flag defined in a
// file whose path ends with FILE, "FILE:a,b" only flags a and b of it (Abseil names).
bool Selected(const absl::CommandLineFlag& flag, const std::vector<std::string>& flag_files) {
  for (const std::string& spec : flag_files) {
    absl::string_view file = spec, names;
    if (auto colon = file.find(':'); colon != absl::string_view::npos) {
      names = file.substr(colon + 1);
      file = file.substr(0, colon);
    }
    if (!absl::EndsWith(flag.Filename(), file)) continue;
    if (names.empty()) return true;
    for (absl::string_view n : absl::StrSplit(names, ',')) {
      if (n == flag.Name()) return true;
    }
  }
  return false;
}

void PrintHelp(absl::string_view usage, const std::vector<std::string>& flag_files) {
  fmt::print("{}\n\nFlags:\n", std::string(usage));
  std::vector<absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (Selected(*flag, flag_files)) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](auto* a, auto* b) { return a->Name() < b->Name(); });
  for (auto* f : flags) {
    std::string def = f->DefaultValue();
    std::string name(f->Name());
    std::replace(name.begin(), name.end(), '_', '-');
    fmt::print("  --{}{}\n      {}\n", name, def.empty() ? "" : "=" + def, f->Help());
  }
}

[[noreturn]] void UsageError(absl::string_view program, absl::string_view message) {
  fmt::print(stderr, "{}: {} (see --help)\n", std::string(program), std::string(message));
  std::exit(kExitUsage);
}

}  // namespace

std::vector<std::string> ParseFlagsOrExit(int argc, char** argv, absl::string_view usage,
                                          const std::vector<std::string>& flag_files) {
  std::string program = argc > 0 ? argv[0] : "psbench";
  if (auto slash = program.rfind('/'); slash != std::string::npos) program.erase(0, slash + 1);
  // --version alone: the build, as every record names it (to check the installs of a cluster).
  if (argc == 2 && (absl::string_view(argv[1]) == "--version" || absl::string_view(argv[1]) == "-version")) {
    fmt::print("{} {}\n", program, PsbenchVersion());
    std::exit(0);
  }
  bool help = false;
  absl::StatusOr<std::vector<std::string>> positional = ParseFlags(argc, argv, flag_files, &help);
  if (!positional.ok()) UsageError(program, positional.status().message());
  if (help) {
    PrintHelp(usage, flag_files);
    std::exit(0);
  }
  return *std::move(positional);
}

absl::StatusOr<std::vector<std::string>> ParseFlags(int argc, char** argv,
                                                    const std::vector<std::string>& flag_files,
                                                    bool* help) {
  *help = false;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional.emplace_back(argv[i]);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.emplace_back(arg);
      continue;
    }
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    absl::string_view name = arg;
    std::string value;
    bool has_value = false;
    if (auto eq = arg.find('='); eq != absl::string_view::npos) {
      name = arg.substr(0, eq);
      value = std::string(arg.substr(eq + 1));
      has_value = true;
    }
    if (name == "help" || name == "h") {
      *help = true;
      return positional;
    }
    // Users write --skew-bias; Abseil names the flag skew_bias.
    std::string shown(name);
    std::string flag_name(name);
    std::replace(flag_name.begin(), flag_name.end(), '-', '_');
    name = flag_name;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no") && !has_value) {
      // --novalidate and --no-validate both turn a bool off.
      absl::string_view positive_name = name.substr(absl::StartsWith(name, "no_") ? 3 : 2);
      absl::CommandLineFlag* positive = absl::FindCommandLineFlag(positive_name);
      if (positive != nullptr && positive->IsOfType<bool>()) {
        flag = positive;
        name = positive_name;
        value = "false";
        has_value = true;
      }
    }
    if (flag == nullptr || !Selected(*flag, flag_files)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", shown));
    }
    if (!has_value) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < argc && !absl::StartsWith(argv[i + 1], "--")) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", shown, " needs a value"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(absl::StrCat("--", shown, "=", value, ": ", error));
    }
    std::string user_name(name);
    std::replace(user_name.begin(), user_name.end(), '_', '-');
    SetFlags().insert(user_name);
  }
  return positional;
}

bool FlagWasSet(absl::string_view name) { return SetFlags().contains(name); }

void ForgetFlagsSet() { SetFlags().clear(); }

std::vector<std::string> FlagsSet() { return {SetFlags().begin(), SetFlags().end()}; }

void Die(absl::string_view program, const absl::Status& status, int code) {
  Die(program, status.message(), code);
}

namespace {
std::atomic<void (*)()> g_die_hook{nullptr};
}  // namespace

void SetDieHook(void (*hook)()) { g_die_hook = hook; }

void Die(absl::string_view program, absl::string_view message, int code) {
  if (void (*hook)() = g_die_hook.exchange(nullptr)) hook();
  if (absl::GetFlag(FLAGS_fatal_line)) {
    // One line, whatever the message holds: the launcher reads it back as one.
    std::string line(message);
    std::replace(line.begin(), line.end(), '\n', ' ');
    fmt::print(stdout, "{}{} {}\n", kFatalLinePrefix, code, line);
    std::fflush(stdout);
    std::_Exit(code);
  }
  std::fflush(stdout);
  fmt::print(stderr, "{}: {}\n", std::string(program), std::string(message));
  std::fflush(stderr);
  std::_Exit(code);
}

absl::Status CheckOutputsSpareInputs(const std::vector<NamedPath>& more_inputs,
                                     const std::string& json, const std::string& hdr_out) {
  // The flags by their Abseil names; a program that lacks one has nothing to check for it.
  auto value = [](const char* name) -> std::string {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) return "";
    return flag->CurrentValue();
  };
  auto dashed = [](std::string name) {
    std::replace(name.begin(), name.end(), '_', '-');
    return "--" + name;
  };
  std::vector<NamedPath> inputs;
  for (const char* name : {"trace", "scenario", "hostfile", "tls_ca", "tls_cert", "tls_key"}) {
    if (std::string path = value(name); !path.empty()) inputs.push_back({dashed(name), path});
  }
  inputs.insert(inputs.end(), more_inputs.begin(), more_inputs.end());
  for (const char* name : {"json", "write_trace", "progress_file", "markdown", "html", "csv"}) {
    const std::string path = std::string(name) == "json" && !json.empty() ? json : value(name);
    if (path.empty() || path == "-") continue;
    if (absl::Status s = CheckOutputSpares(dashed(name), path, inputs); !s.ok()) return s;
    inputs.push_back({dashed(name), path});  // a later output must not be this one either
    // The progress file is written beside, as FILE.tmp, and renamed over FILE.
    if (std::string(name) == "progress_file") {
      if (absl::Status s = CheckOutputSpares(dashed(name), path + ".tmp", inputs); !s.ok()) return s;
      inputs.push_back({dashed(name), path + ".tmp"});
    }
  }
  if (std::string prefix = hdr_out.empty() ? value("hdr_out") : hdr_out; !prefix.empty()) {
    return CheckHdrOutSpares(prefix, inputs);
  }
  return absl::OkStatus();
}

}  // namespace psbench
