#include "bench/load.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fmt/core.h"

namespace psbench {
namespace {

constexpr const char* kKinds = "closed, constant:RATE or poisson:RATE (operations per second per worker)";

// "64000", "64k", "2.5M": a finite rate in (0, kMaxLoadRate].
absl::StatusOr<double> ParseRate(absl::string_view text, absl::string_view flag, absl::string_view whole) {
  double scale = 1;
  absl::string_view digits = text;
  if (!digits.empty() && (digits.back() == 'k' || digits.back() == 'K')) {
    scale = 1e3;
    digits.remove_suffix(1);
  } else if (!digits.empty() && digits.back() == 'M') {
    scale = 1e6;
    digits.remove_suffix(1);
  }
  double rate = 0;
  if (digits.empty() || !absl::SimpleAtod(digits, &rate) || !std::isfinite(rate)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", whole, ": '", text, "' is not a rate (operations per second, e.g. 1000 or 2.5k)"));
  }
  rate *= scale;
  if (!(rate > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "=", whole, ": the rate must be above 0 operations per second"));
  }
  if (rate < kMinLoadRate) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", whole, ": the rate is under ", kMinLoadRate, " operations per second"));
  }
  if (rate > kMaxLoadRate) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", whole, ": the rate is over ", kMaxLoadRate, " operations per second"));
  }
  return rate;
}

std::string RateText(double rate) { return fmt::format("{:.10g}", rate); }

}  // namespace

absl::StatusOr<LoadKind> ParseLoadKind(absl::string_view text) {
  if (text == "closed") return LoadKind::kClosed;
  if (text == "constant") return LoadKind::kConstant;
  if (text == "poisson") return LoadKind::kPoisson;
  return absl::InvalidArgumentError("");
}

absl::string_view LoadKindName(LoadKind k) {
  switch (k) {
    case LoadKind::kClosed: return "closed";
    case LoadKind::kConstant: return "constant";
    case LoadKind::kPoisson: return "poisson";
  }
  return "?";
}

std::string LoadName(const LoadSchedule& s) {
  if (!s.open()) return "closed";
  return absl::StrCat(LoadKindName(s.kind), ":", RateText(s.rate));
}

absl::StatusOr<LoadSchedule> ParseLoad(absl::string_view text, absl::string_view flag) {
  std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(text, absl::MaxSplits(':', 1));
  auto kind = ParseLoadKind(parts.first);
  if (!kind.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "=", text, " is not a load; use ", kKinds));
  }
  LoadSchedule s;
  s.kind = *kind;
  const bool has_rate = text.find(':') != absl::string_view::npos;
  if (s.kind == LoadKind::kClosed) {
    if (has_rate) return absl::InvalidArgumentError(absl::StrCat(flag, "=", text, ": a closed loop takes no rate"));
    return s;
  }
  if (!has_rate) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", text, ": give the rate, e.g. ", parts.first, ":1000 (operations per second per worker)"));
  }
  auto rate = ParseRate(parts.second, flag, text);
  if (!rate.ok()) return rate.status();
  s.rate = *rate;
  return s;
}

std::string LoadSweepName(const LoadSweep& s) {
  return absl::StrCat(LoadKindName(s.kind), ":", RateText(s.lo), "..", RateText(s.hi), "*", RateText(s.factor));
}

absl::StatusOr<LoadSweep> ParseLoadSweep(absl::string_view text, absl::string_view flag) {
  const std::string usage = absl::StrCat(flag, "=", text, " is not a sweep; use KIND:LO..HI*FACTOR, e.g. poisson:1000..64000*2");
  std::pair<absl::string_view, absl::string_view> kind_rest = absl::StrSplit(text, absl::MaxSplits(':', 1));
  auto kind = ParseLoadKind(kind_rest.first);
  if (!kind.ok() || *kind == LoadKind::kClosed) {
    return absl::InvalidArgumentError(absl::StrCat(usage, " (KIND: constant or poisson)"));
  }
  const size_t dots = kind_rest.second.find("..");
  const size_t star = kind_rest.second.rfind('*');
  if (text.find(':') == absl::string_view::npos || dots == absl::string_view::npos ||
      star == absl::string_view::npos || star < dots ||
      kind_rest.second.find("...") != absl::string_view::npos) {  // not LO .. .HI
    return absl::InvalidArgumentError(usage);
  }
  LoadSweep s;
  s.kind = *kind;
  auto lo = ParseRate(kind_rest.second.substr(0, dots), flag, text);
  if (!lo.ok()) return lo.status();
  auto hi = ParseRate(kind_rest.second.substr(dots + 2, star - dots - 2), flag, text);
  if (!hi.ok()) return hi.status();
  const absl::string_view factor = kind_rest.second.substr(star + 1);
  if (!absl::SimpleAtod(factor, &s.factor) || !std::isfinite(s.factor)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "=", text, ": '", factor, "' is not a factor (e.g. 2)"));
  }
  s.lo = *lo;
  s.hi = *hi;
  if (absl::Status st = CheckLoadSweep(s, flag); !st.ok()) return st;
  return s;
}

absl::Status CheckLoadSweep(const LoadSweep& s, absl::string_view flag) {
  const std::string name = absl::StrCat(flag, "=", LoadSweepName(s));
  if (s.kind == LoadKind::kClosed) return absl::InvalidArgumentError(absl::StrCat(name, ": a sweep is of an open-loop load"));
  if (!(s.lo >= kMinLoadRate) || !(s.hi <= kMaxLoadRate) || !std::isfinite(s.lo) || !std::isfinite(s.hi)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": rates must be in [", kMinLoadRate, ", ", kMaxLoadRate, "]"));
  }
  if (s.lo > s.hi) return absl::InvalidArgumentError(absl::StrCat(name, ": LO is above HI"));
  if (!(s.factor > 1) || !std::isfinite(s.factor)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": FACTOR must be above 1, or the sweep never reaches HI"));
  }
  // Points LO * FACTOR^k up to HI (a rounding's worth over it still counts).
  const double points = std::floor(std::log(s.hi / s.lo) / std::log(s.factor) + 1e-9) + 1;
  if (points > static_cast<double>(kMaxLoadSweepPoints)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", points, " rates, more than ", kMaxLoadSweepPoints, "; raise FACTOR"));
  }
  return absl::OkStatus();
}

std::vector<LoadSchedule> SweepPoints(const LoadSweep& s) {
  std::vector<LoadSchedule> out;
  if (!CheckLoadSweep(s).ok()) return out;
  for (double rate = s.lo; rate <= s.hi * (1 + 1e-9) && out.size() < kMaxLoadSweepPoints; rate *= s.factor) {
    out.push_back({s.kind, rate});
  }
  return out;
}

uint64_t LoadSeed(uint64_t seed, int worker_index) {
  // SplitMix64's finalizer over the pair: nearby seeds and indices give unrelated streams.
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(worker_index) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Arrivals::Arrivals(const LoadSchedule& s, uint64_t seed)
    : schedule_(s), rng_(seed), gap_(s.open() ? s.rate / 1e9 : 1.0) {
  if (s.kind == LoadKind::kConstant) {
    // Below the period also where the draw can return its upper bound (libstdc++'s
    // generate_canonical may).
    const double period = 1e9 / s.rate;
    at_ns_ = std::min(std::uniform_real_distribution<double>(0, period)(rng_), std::nextafter(period, 0.0));
  }
}

uint64_t Arrivals::Next() {
  if (schedule_.kind == LoadKind::kConstant) {
    // From the index, not by adding up gaps: no drift over millions of operations. Rounded
    // down, so that operation i starts before (i + 1) / rate (and within 1 ns of i / rate).
    return static_cast<uint64_t>(std::floor(at_ns_ + static_cast<double>(index_++) * 1e9 / schedule_.rate));
  }
  const uint64_t at = static_cast<uint64_t>(std::llround(at_ns_));
  at_ns_ += gap_(rng_);
  return at;
}

}  // namespace psbench
