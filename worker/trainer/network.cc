#include "worker/trainer/network.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/trainer/dnnl_network.h"

namespace psbench::trainer {

std::vector<std::string> EngineNames() { return {"cpu"}; }

absl::StatusOr<std::unique_ptr<Network>> MakeNetwork(absl::string_view engine,
                                                     const Model& model, int batch,
                                                     int threads) {
  if (engine == "cpu") return MakeDnnlNetwork(model, batch, threads);
  return absl::InvalidArgumentError(absl::StrCat("unknown engine '", engine, "'; built with: ",
                                                 absl::StrJoin(EngineNames(), ", ")));
}

}  // namespace psbench::trainer
