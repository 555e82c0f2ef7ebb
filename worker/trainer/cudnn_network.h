#ifndef PSBENCH_WORKER_TRAINER_CUDNN_NETWORK_H_
#define PSBENCH_WORKER_TRAINER_CUDNN_NETWORK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/trainer/network.h"

namespace psbench::trainer {

// The GPU engine (cuDNN + cuBLAS) on CUDA device 0, in the module psbench_trainer_gpu.so
// (see network.cc, which loads it). Returns null and sets *error when it cannot be built
// (FAILED_PRECONDITION: no device; anything else: the model or the math). `math` is a Math,
// `layout` a Layout.
extern "C" Network* PsbenchMakeCudnnNetwork(const Model* model, int batch, int math, int layout, int* code,
                                            std::string* error);

}  // namespace psbench::trainer

#endif  // PSBENCH_WORKER_TRAINER_CUDNN_NETWORK_H_
