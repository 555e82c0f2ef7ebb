#include "bench/hdr_text.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "bench/cli.h"
#include "bench/load_report.h"
#include "inputs/input_file.h"
#include "fmt/core.h"

namespace psbench {
namespace {

using json = nlohmann::json;

constexpr double kNsPerUnit = 1e3;  // the text's values are in µs

// What a record's measurement was, in a few words, for the list of files written.
std::string Describe(const Record& r) {
  const std::string rep = r.RepetitionText();
  return fmt::format("{} {} B {} worker {}{}", r.Series(), r.payload_bytes ? fmt::format("{:.0f}", *r.payload_bytes) : "?",
                     JsonTextAt(LoadOf(r), "schedule"), r.worker_index.value_or(0), rep.empty() ? "" : " " + rep);
}

}  // namespace

json HistogramToJson(const Histogram& h) {
  const Histogram::Parts p = h.ToParts();
  json counts = json::array();
  size_t previous = 0;
  for (const auto& [b, n] : p.buckets) {
    counts.push_back(b - previous);
    counts.push_back(n);
    previous = b;
  }
  return {{"unit", "ns"},   {"sub_bits", Histogram::kSubBits}, {"counts", counts}, {"min", p.min},
          {"max", p.max},   {"sum", p.sum},                    {"sum_sq", p.sum_sq}};
}

absl::StatusOr<Histogram> HistogramFromJson(const json& j) {
  auto bad = [](const std::string& why) { return absl::InvalidArgumentError(absl::StrCat("histogram: ", why)); };
  if (JsonTextAt(j, "unit") != "ns" || !j.contains("sub_bits") || j["sub_bits"] != Histogram::kSubBits) {
    return bad(absl::StrCat("not one of this psbench's (unit ns, sub_bits ", Histogram::kSubBits, ")"));
  }
  const json& counts = j.contains("counts") ? j["counts"] : json();
  if (!counts.is_array() || counts.size() % 2 != 0) return bad("'counts' must be pairs of bucket step and count");
  Histogram::Parts p;
  size_t bucket = 0;
  for (size_t i = 0; i < counts.size(); i += 2) {
    if (!counts[i].is_number_unsigned() || !counts[i + 1].is_number_unsigned()) return bad("a count is not a whole number");
    const uint64_t step = counts[i].get<uint64_t>();
    if (step >= Histogram::NumBuckets() || (i > 0 && step == 0)) return bad("a bucket out of range");
    bucket += static_cast<size_t>(step);
    p.buckets.push_back({bucket, counts[i + 1].get<uint64_t>()});
  }
  for (const char* k : {"min", "max"}) {
    if (!j.contains(k) || !j[k].is_number_unsigned()) return bad(absl::StrCat("'", k, "' is not a whole number"));
  }
  for (const char* k : {"sum", "sum_sq"}) {
    if (!j.contains(k) || !j[k].is_number()) return bad(absl::StrCat("'", k, "' is not a number"));
  }
  p.min = j["min"].get<uint64_t>();
  p.max = j["max"].get<uint64_t>();
  p.sum = j["sum"].get<double>();
  p.sum_sq = j["sum_sq"].get<double>();
  auto h = Histogram::FromParts(p);
  if (!h) return bad("its buckets, minimum and maximum disagree");
  return *h;
}

json PercentilesJson(const Histogram& h) {
  auto us = [](double ns) { return ns / kNsPerUnit; };
  return {{"count", h.count()},
          {"min", us(static_cast<double>(h.min()))},
          {"p50", us(h.Percentile(0.5))},
          {"p90", us(h.Percentile(0.9))},
          {"p99", us(h.Percentile(0.99))},
          {"p999", us(h.Percentile(0.999))},
          {"p9999", us(h.Percentile(0.9999))},
          {"max", us(static_cast<double>(h.max()))},
          {"mean", us(h.mean())}};
}

std::string HdrPercentileText(const Histogram& h, int ticks_per_half) {
  std::string out = fmt::format("{:>12} {:>12} {:>12} {:>12}\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)");
  const uint64_t total = h.count();
  const Histogram::Parts p = h.ToParts();
  // As HdrHistogram's percentile iterator: a level is reported at the first bucket whose
  // cumulative count reaches it, with that bucket's highest value; the levels close in on
  // 100 % by halves, `ticks_per_half` to each. The last bucket reports one level, then 100 %.
  double level = 0;
  uint64_t seen = 0;
  for (const auto& [b, n] : p.buckets) {
    seen += n;
    const double reached = 100.0 * static_cast<double>(seen) / static_cast<double>(total);
    const double value = static_cast<double>(std::min(Histogram::BucketHigh(b) - 1, p.max)) / kNsPerUnit;
    // (Bounded: levels close in on 100 % and never reach it; a few thousand lines at most.)
    for (int lines = 0; level < 100 && reached >= level && lines < 4096; ++lines) {
      out += fmt::format("{:12.3f} {:12.6f} {:12d} {:12.2f}\n", value, level / 100, seen, 1 / (1 - level / 100));
      const double halvings = std::floor(std::log2(100 / (100 - level))) + 1;
      level += 100 / (ticks_per_half * std::pow(2.0, halvings));
      if (seen == total) break;
    }
  }
  if (total > 0) {
    out += fmt::format("{:12.3f} {:12.6f} {:12d} {:>12}\n", static_cast<double>(p.max) / kNsPerUnit, 1.0, total, "inf");
  }
  out += fmt::format("#[Mean    = {:12.3f}, StdDeviation   = {:12.3f}]\n", h.mean() / kNsPerUnit, h.stdev() / kNsPerUnit);
  out += fmt::format("#[Max     = {:12.3f}, Total count    = {:12d}]\n", static_cast<double>(h.max()) / kNsPerUnit, total);
  out += fmt::format("#[Buckets = {:12d}, SubBuckets     = {:12d}]\n", Histogram::NumBuckets() >> Histogram::kSubBits,
                     1 << Histogram::kSubBits);
  return out;
}

absl::StatusOr<std::vector<std::string>> WriteHdrFiles(const std::string& prefix, const std::vector<Record>& records) {
  std::vector<const Record*> open;
  for (const Record& r : records) {
    if (LoadOf(r).contains("histograms")) open.push_back(&r);
  }
  std::vector<std::string> written;
  for (size_t i = 0; i < open.size(); ++i) {
    const std::string stem = open.size() == 1 ? prefix : absl::StrCat(prefix, ".", i + 1);
    for (const char* which : kLoadHistograms) {
      auto h = HistogramFromJson(JsonObjectAt(JsonObjectAt(LoadOf(*open[i]), "histograms"), which));
      if (!h.ok()) return absl::InvalidArgumentError(absl::StrCat("--hdr-out: the ", which, " ", h.status().message()));
      const std::string path = absl::StrCat(stem, ".", which, ".hgrm");
      if (absl::Status s = WriteOutputFile(path, HdrPercentileText(*h)); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("--hdr-out: ", path, ": ", s.message()));
      }
    }
    written.push_back(absl::StrCat(stem, ".{corrected,uncorrected,lag}.hgrm: ", Describe(*open[i])));
  }
  return written;
}

int WriteHdrOrWarn(const std::string& prefix, const std::vector<Record>& records) {
  if (prefix.empty()) return 0;
  auto written = WriteHdrFiles(prefix, records);
  if (!written.ok()) {
    fmt::print(stderr, "psbench: {}\n", std::string(written.status().message()));
    return kExitRuntime;
  }
  for (const std::string& line : *written) fmt::print("# wrote {}\n", line);
  std::fflush(stdout);
  return 0;
}

absl::Status CheckHdrOut(const std::string& prefix) {
  const std::string name = std::filesystem::path(prefix).filename().string();
  // "-" is stdout to --json and --progress-file; here it would name files "-.lag.hgrm".
  if (prefix == "-") {
    return absl::InvalidArgumentError("--hdr-out=-: give the start of a file name (three files are written, "
                                      "not one stream to stdout)");
  }
  if (name.empty() || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("--hdr-out=", prefix, ": give the start of a file name (e.g. ",
                                                   prefix, name.empty() ? "" : "/", "run), not a directory"));
  }
  // Every name a single point writes; a sweep's numbered names are checked as they are written.
  for (const char* which : kLoadHistograms) {
    const std::string path = absl::StrCat(prefix, ".", which, ".hgrm");
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("--hdr-out=", prefix, ": ", path, " is not a regular file"));
    }
    if (absl::Status s = CheckOutputWritable("--hdr-out", path); !s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace {

// Whether `name` is one that --hdr-out with file-name prefix `stem` writes:
// stem[.N].<histogram>.hgrm.
bool IsHdrOutName(const std::string& stem, std::string_view name) {
  if (name.size() <= stem.size() + 1 || name.substr(0, stem.size()) != stem || name[stem.size()] != '.') return false;
  name.remove_prefix(stem.size() + 1);
  size_t digits = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
  if (digits > 0 && digits < name.size() && name[digits] == '.') name.remove_prefix(digits + 1);
  for (const char* which : kLoadHistograms) {
    if (name == absl::StrCat(which, ".hgrm")) return true;
  }
  return false;
}

}  // namespace

absl::Status CheckHdrOutSpares(const std::string& prefix, const std::vector<NamedPath>& files) {
  namespace fs = std::filesystem;
  const fs::path p(prefix);
  const std::string stem = p.filename().string();
  std::error_code ec;
  const fs::path dir = fs::canonical(p.parent_path().empty() ? fs::path(".") : p.parent_path(), ec);
  if (ec || stem.empty()) return absl::OkStatus();  // CheckHdrOut says what is wrong with it
  auto clash = [&](const NamedPath& f, const std::string& written) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--hdr-out=", prefix, " would write ", written, " over ", f.flag, f.flag.rfind("--", 0) == 0 ? "=" : " ",
        f.path, "; write the histograms elsewhere"));
  };
  // A file of the invocation by its path (one not written yet: another output).
  for (const NamedPath& f : files) {
    if (f.path.empty() || f.path == "-") continue;
    std::error_code f_ec;
    const fs::path c = fs::weakly_canonical(fs::absolute(f.path, f_ec), f_ec);
    if (!f_ec && c.parent_path() == dir && IsHdrOutName(stem, c.filename().string())) {
      return clash(f, (p.parent_path() / c.filename()).string());
    }
  }
  // Such a file that exists, as another name (a link) of one of the invocation's.
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!IsHdrOutName(stem, name)) continue;
    for (const NamedPath& f : files) {
      if (!CheckOutputSpares("--hdr-out", it->path().string(), {f}).ok()) return clash(f, (p.parent_path() / name).string());
    }
  }
  return absl::OkStatus();
}

}  // namespace psbench
