#ifndef PSBENCH_WORKER_TRAINER_CUDNN_NETWORK_H_
#define PSBENCH_WORKER_TRAINER_CUDNN_NETWORK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/trainer/network.h"

namespace psbench::trainer {

// The GPU engine (cuDNN + cuBLAS) on CUDA device 0. FAILED_PRECONDITION when there is none.
absl::StatusOr<std::unique_ptr<Network>> MakeCudnnNetwork(const Model& model, int batch);

}  // namespace psbench::trainer

#endif  // PSBENCH_WORKER_TRAINER_CUDNN_NETWORK_H_
