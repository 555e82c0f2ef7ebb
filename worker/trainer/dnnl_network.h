#ifndef PSBENCH_WORKER_TRAINER_DNNL_NETWORK_H_
#define PSBENCH_WORKER_TRAINER_DNNL_NETWORK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/trainer/network.h"

namespace psbench::trainer {

// The CPU engine (oneDNN). threads <= 0 keeps OpenMP's default (OMP_NUM_THREADS or cores).
absl::StatusOr<std::unique_ptr<Network>> MakeDnnlNetwork(const Model& model, int batch,
                                                         int threads);

}  // namespace psbench::trainer

#endif  // PSBENCH_WORKER_TRAINER_DNNL_NETWORK_H_
