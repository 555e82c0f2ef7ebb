#include "worker/trainer/network.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/trainer/dnnl_network.h"
#ifdef PSBENCH_HAVE_CUDA
#include "worker/trainer/cudnn_network.h"
#endif

namespace psbench::trainer {

std::vector<std::string> EngineNames() {
#ifdef PSBENCH_HAVE_CUDA
  return {"cpu", "gpu"};
#else
  return {"cpu"};
#endif
}

absl::StatusOr<std::unique_ptr<Network>> MakeNetwork(absl::string_view engine,
                                                     const Model& model, int batch,
                                                     int threads) {
  if (engine == "cpu") return MakeDnnlNetwork(model, batch, threads);
#ifdef PSBENCH_HAVE_CUDA
  if (engine == "gpu") return MakeCudnnNetwork(model, batch);
#endif
  return absl::InvalidArgumentError(absl::StrCat("unknown engine '", engine, "'; built with: ",
                                                 absl::StrJoin(EngineNames(), ", ")));
}

}  // namespace psbench::trainer
