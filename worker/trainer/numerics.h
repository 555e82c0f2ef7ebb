// The arithmetic and device layout a trainer engine is asked for (--math, --layout), and which
// engine takes which: parsed and checked in one place, for the flags (built with or without
// the trainer) and for the engines alike.
#ifndef PSBENCH_WORKER_TRAINER_NUMERICS_H_
#define PSBENCH_WORKER_TRAINER_NUMERICS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psbench::trainer {

// The arithmetic an engine uses: fp32 everywhere, TF32 tensor cores for convolutions and
// matrix products (FP32 storage), or bf16 compute.
enum class Math { kFp32, kTf32, kBf16 };
absl::StatusOr<Math> ParseMath(absl::string_view name);
const char* MathName(Math math);

// How the GPU engine lays out activations and convolution filters on the device: NCHW with
// KCRS filters, or NHWC ("channels last") with KRSC filters, which tensor-core kernels read
// without transposing. kAuto: NHWC for tf32, NCHW for fp32 (whose fastest algorithms,
// Winograd and FFT, are NCHW only). Host buffers are NCHW/KCRS either way.
enum class Layout { kAuto, kNchw, kNhwc };
absl::StatusOr<Layout> ParseLayout(absl::string_view name);
const char* LayoutName(Layout layout);

// Whether `engine` ("cpu", "gpu") takes this math and layout: the CPU engine computes in fp32
// and oneDNN picks each layer's layout.
absl::Status CheckEngineTakes(absl::string_view engine, Math math, Layout layout);

}  // namespace psbench::trainer

#endif  // PSBENCH_WORKER_TRAINER_NUMERICS_H_
