// Command-line parsing on Abseil flags, with psbench's exit codes: a bad flag or value is
// one line on stderr and exit 2 (Abseil's own parser exits 1, which psbench keeps for
// runtime failures).
#ifndef PSBENCH_BENCH_CLI_H_
#define PSBENCH_BENCH_CLI_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "inputs/input_file.h"

namespace psbench {

inline constexpr int kExitRuntime = 1;
inline constexpr int kExitUsage = 2;
// The exit status a failure means: kExitUsage for INVALID_ARGUMENT (bad input, wherever it
// was found), else kExitRuntime.
inline int ExitCodeFor(const absl::Status& s) {
  return s.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitRuntime;
}

// Parses argv[1..] into the registered Abseil flags. Returns the positional arguments.
// Only flags defined in source files whose path ends with one of `flag_files` (e.g.
// "/worker/worker_main.cc") are accepted, or only some of a file's ("/cli/launch_flags.cc:json",
// Abseil names after the colon); --help prints `usage` and those flags, then exits
// 0. Errors exit 2.
std::vector<std::string> ParseFlagsOrExit(int argc, char** argv, absl::string_view usage,
                                          const std::vector<std::string>& flag_files);

// The same without exiting: an error is INVALID_ARGUMENT with the one-line message
// ("unknown flag --x"); --help stops parsing and sets *help.
absl::StatusOr<std::vector<std::string>> ParseFlags(int argc, char** argv,
                                                    const std::vector<std::string>& flag_files,
                                                    bool* help);

// Names of the flags given explicitly on the command line (after ParseFlagsOrExit).
bool FlagWasSet(absl::string_view name);
std::vector<std::string> FlagsSet();
// Forgets them (for a fuzz target that parses many command lines in one process).
void ForgetFlagsSet();

// INVALID_ARGUMENT naming both when a file this program writes (--json, --write-trace,
// --progress-file, --markdown, --html, --csv, as this program has them) is one it reads
// (--trace, --scenario, --hostfile, the --tls-* files, and `more_inputs`), or when two
// outputs name one file, or when a file --hdr-out may write is one of them. `json` and
// `hdr_out`, when not empty, are those flags' values as the program will use them (a worker
// of an MPI job expands %w).
absl::Status CheckOutputsSpareInputs(const std::vector<NamedPath>& more_inputs = {},
                                     const std::string& json = "", const std::string& hdr_out = "");

// For processes started over ssh: a thread reads stdin and, at its end (the launcher and so
// its ssh session are gone), sends this process SIGTERM, so no remote process outlives its
// launcher. Call after the signal handling is set up.
void ExitWhenStdinCloses();

// The flag file of --fatal-line, which psbench-ps and psbench-worker accept
// ("/bench/cli.cc:fatal_line" in ParseFlagsOrExit's list).
inline constexpr char kFatalLineFlag[] = "/bench/cli.cc:fatal_line";
// How a fatal error begins on stdout under --fatal-line: "#fatal CODE MESSAGE".
inline constexpr char kFatalLinePrefix[] = "#fatal ";

// Prints "<program>: <message>" to stderr and exits with `code`; under --fatal-line,
// "#fatal <code> <message>" on stdout instead.
[[noreturn]] void Die(absl::string_view program, const absl::Status& status, int code);
[[noreturn]] void Die(absl::string_view program, absl::string_view message, int code);
// Has Die run `hook` first (one hook per process; nullptr for none): what an exit without
// destructors would leave behind, such as a temporary directory.
void SetDieHook(void (*hook)());

}  // namespace psbench

#endif  // PSBENCH_BENCH_CLI_H_
