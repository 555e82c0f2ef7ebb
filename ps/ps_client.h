// The worker's half of the PS protocol (param_protocol.h), as ps-lite's KVWorker is to its
// server: a model of float32 tensors placed over the PS by bytes, one exchange round (every
// PS's shard out, its parameters back), and parameters read back together with each PS's
// account of the updates it applied. The trainer and the updates check both train through it;
// a transport's Client carries the bytes. Given buckets (groups of tensors whose gradients
// are ready together), a step can also go part by part, each bucket's tensors on each PS as
// one exchange started the moment the caller says, as a replayed backward pass sends them.
#ifndef PSBENCH_PS_PS_CLIENT_H_
#define PSBENCH_PS_PS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "payloads/payload.h"
#include "payloads/placement.h"
#include "ps/param_protocol.h"
#include "transports/transport.h"

namespace psbench {

class PsClient {
 public:
  struct Options {
    std::string run_id;  // every worker of a run gives the same one
    uint32_t worker = 0, num_workers = 1;
    bool sync = true;
    float learning_rate = 0.01f, momentum = 0.9f;
    uint64_t seed = 0;  // the payloads' initial bytes (overwritten before any exchange)
    // How long one round may take, past the transport's own RPC timeout.
    absl::Duration round_timeout = absl::Seconds(65);
    // Tensors (model indices) by bucket: every tensor in one. Empty: no parts.
    std::vector<std::vector<size_t>> buckets;
  };
  // One bucket's tensors on one PS: what StartPart sends.
  struct Part {
    size_t ps = 0;
    size_t bucket = 0;
    std::vector<size_t> tensors;  // model indices, in model order
    uint64_t bytes = 0;
  };
  // Places tensor t (`tensor_bytes[t]`, a multiple of 4) on the PS with the fewest bytes so
  // far, in model order (as tf_cnn_benchmarks places variables), and registers each PS's
  // request [header, gradients...] and reply [header, parameters...] with `client`.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(Client& client,
                                                          const std::vector<uint64_t>& tensor_bytes,
                                                          Options options);
  ~PsClient();  // unregisters the payloads
  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;

  size_t num_ps() const { return shards_.size(); }
  size_t num_tensors() const { return outgoing_.size(); }
  // PS `ps`'s shard: the tensors placed on it, in model order, and their bytes.
  const Shard& shard(size_t ps) const { return shards_[ps].placed; }
  const std::string& ps_address(size_t ps) const { return client_.server_address(ps); }
  // The hash of the run id that every header and report carries.
  uint64_t run_hash() const { return header_.run_id; }

  // Tensor t as it goes out (gradients, or initial values) and as the last round brought it
  // back (the PS's parameters). Both stay where they are for the client's life: a network
  // may compute with them in place.
  float* outgoing(int t) { return outgoing_[t]; }
  float* incoming(int t) { return incoming_[t]; }
  uint64_t tensor_bytes(int t) const { return bytes_[t]; }

  // One round: sends the shards of `ps` (every PS when empty) and waits for every answer.
  // kInit: the first init of a run sets the PS's parameters, later ones only read them.
  // Errors name the step and the PS.
  absl::Status Exchange(ExchangeHeader::Kind kind, uint64_t step, const std::vector<size_t>& ps = {});
  // PS `ps`'s reply header of the last whole round (its updates_applied); parts leave it.
  ExchangeHeader ReplyHeader(size_t ps) const;

  // Parts (Options::buckets): bucket by bucket, each split over the PS in PS order.
  size_t num_parts() const { return parts_.size(); }
  const Part& part(size_t i) const { return parts_[i].part; }
  // Starts part `i` of step `step` (its gradients out of outgoing(), its parameters into
  // incoming()); no other exchange of the part may be in flight.
  void StartPart(size_t i, uint64_t step);
  // Waits for a started part until `deadline`: its index, nullopt when none finished by then,
  // or its failure naming the step and the PS. Every started part must be waited for before
  // the next round or part of it.
  absl::StatusOr<std::optional<size_t>> NextPart(absl::Time deadline);

  // PS `ps`'s account of the updates it applied in this run (checked to be this run's), and
  // what its data plane is.
  absl::StatusOr<UpdateReport> Report(size_t ps);
  const std::string& data_plane(size_t ps) const { return data_plane_[ps]; }

  // The parameters of every PS (in incoming()) with, for each PS, the report of the updates
  // they contain. Sync: the last round's answers are final, so the reports are taken as they
  // are. Async: peers may still be pushing, so each PS is read (a kInit round) until its
  // update count did not move between the read and the report; `fill_initial` puts the
  // initial values in outgoing() before each read (a PS that lost the run meanwhile takes
  // them, and the reports say so). `reads` counts those rounds.
  absl::StatusOr<std::vector<UpdateReport>> ReadBack(const std::function<void()>& fill_initial, int* reads);

  // [{"ps", "tensors": count, "bytes"}], the placement as records show it.
  nlohmann::json PlacementJson() const;

  // The payload bytes of every exchange completed so far, headers included: sent (gradients,
  // initial values) and received back (parameters). What the data plane must have carried.
  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }

 private:
  struct ShardPayloads {
    Shard placed;
    // [header, its tensors..., then a header and an index list per part on this PS]; with
    // parts the whole-shard request and reply are views of their first buffers.
    std::unique_ptr<Payload> request_memory, reply_memory;
    std::unique_ptr<Payload> request_view, reply_view;
    const Payload* request = nullptr;
    const Payload* reply = nullptr;
    int request_id = -1, reply_id = -1;
  };
  struct PartPayloads {
    Part part;
    uint64_t step = 0;
    std::unique_ptr<Payload> request, reply;  // views of its PS's memory
    std::byte* header = nullptr;             // the request's header buffer
    int request_id = -1, reply_id = -1;
  };
  absl::Status MakeParts(const std::vector<uint64_t>& tensor_bytes);
  void Exchanged(const Payload& request, const Payload& reply) {
    bytes_sent_ += request.total_bytes();
    bytes_received_ += reply.total_bytes();
  }
  // `status` of an exchange with PS `ps`, prefixed with what it was and the PS once.
  absl::Status Named(const std::string& what, size_t ps, const absl::Status& status) const;
  PsClient(Client& client, Options options) : client_(client), options_(std::move(options)) {}

  Client& client_;
  Options options_;
  ExchangeHeader header_;
  std::vector<ShardPayloads> shards_;
  std::vector<PartPayloads> parts_;
  std::vector<float*> outgoing_, incoming_;
  std::vector<uint64_t> bytes_;
  std::vector<std::string> data_plane_;
  uint64_t bytes_sent_ = 0, bytes_received_ = 0;
};

}  // namespace psbench

#endif  // PSBENCH_PS_PS_CLIENT_H_
