#include "worker/trainer/numerics.h"

#include "absl/strings/str_cat.h"

namespace psbench::trainer {

absl::StatusOr<Math> ParseMath(absl::string_view name) {
  if (name == "fp32") return Math::kFp32;
  if (name == "tf32") return Math::kTf32;
  if (name == "bf16") return Math::kBf16;
  return absl::InvalidArgumentError(absl::StrCat("--math: '", name, "' is not one of fp32, tf32, bf16"));
}

absl::StatusOr<Layout> ParseLayout(absl::string_view name) {
  if (name == "auto") return Layout::kAuto;
  if (name == "nchw") return Layout::kNchw;
  if (name == "nhwc") return Layout::kNhwc;
  return absl::InvalidArgumentError(absl::StrCat("--layout: '", name, "' is not one of auto, nchw, nhwc"));
}

const char* LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kAuto: return "auto";
    case Layout::kNchw: return "nchw";
    case Layout::kNhwc: return "nhwc";
  }
  return "?";
}

const char* MathName(Math math) {
  switch (math) {
    case Math::kFp32: return "fp32";
    case Math::kTf32: return "tf32";
    case Math::kBf16: return "bf16";
  }
  return "fp32";
}

absl::Status CheckEngineTakes(absl::string_view engine, Math math, Layout layout) {
  if (engine == "gpu") return absl::OkStatus();
  if (math != Math::kFp32) {
    return absl::InvalidArgumentError(
        absl::StrCat("--math=", MathName(math), " needs --engine=gpu: the CPU engine computes in fp32"));
  }
  if (layout != Layout::kAuto) {
    return absl::InvalidArgumentError(
        absl::StrCat("--layout=", LayoutName(layout), " needs --engine=gpu: oneDNN picks each layer's layout"));
  }
  return absl::OkStatus();
}

}  // namespace psbench::trainer
