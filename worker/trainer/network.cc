#include "worker/trainer/network.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/trainer/dnnl_network.h"
#include "worker/trainer/init.h"
#ifdef PSBENCH_HAVE_CUDA
#include <dlfcn.h>

#include <filesystem>

#include "worker/trainer/cudnn_network.h"
#endif

namespace psbench::trainer {

void Network::InitParams(uint64_t seed) {
  for (size_t p = 0; p < params().size(); ++p) {
    const ParamInfo& info = params()[p];
    for (const Layer::Param& spec : model().layers[info.layer].params) {
      if (spec.name != info.name) continue;
      std::vector<float> values(info.count);
      FillInitial(spec, seed, p, values);
      WriteParam(static_cast<int>(p), values);
    }
  }
}

std::vector<std::string> EngineNames() {
#ifdef PSBENCH_HAVE_CUDA
  return {"cpu", "gpu"};
#else
  return {"cpu"};
#endif
}

absl::StatusOr<std::unique_ptr<Network>> MakeNetwork(absl::string_view engine,
                                                     const Model& model, int batch,
                                                     int threads, Math math, Layout layout) {
  if (engine == "cpu") {
    if (absl::Status s = CheckEngineTakes(engine, math, layout); !s.ok()) return s;
    return MakeDnnlNetwork(model, batch, threads);
  }
#ifdef PSBENCH_HAVE_CUDA
  if (engine == "gpu") {
    // Loaded from next to the executable, once, on first use.
    static void* module = [] {
      std::string path =
          (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "psbench_trainer_gpu.so").string();
      return dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    }();
    if (module == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("--engine=gpu: cannot load the GPU engine: ", dlerror()));
    }
    using Make = Network* (*)(const Model*, int, int, int, int*, std::string*);
    auto make = reinterpret_cast<Make>(dlsym(module, "PsbenchMakeCudnnNetwork"));
    if (make == nullptr) return absl::InternalError("--engine=gpu: the GPU engine module has no factory");
    int code = 0;
    std::string error;
    Network* network = make(&model, batch, static_cast<int>(math), static_cast<int>(layout), &code, &error);
    if (network == nullptr) return absl::Status(static_cast<absl::StatusCode>(code), error);
    return std::unique_ptr<Network>(network);
  }
#endif
  // Said as psbench run's launcher says it.
  return absl::InvalidArgumentError(absl::StrCat("--engine=", engine, " is not built in; this psbench has: ",
                                                 absl::StrJoin(EngineNames(), ", ")));
}

}  // namespace psbench::trainer
