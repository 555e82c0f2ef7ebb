#include "transports/rdma_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "payloads/json_field.h"
#include "payloads/size.h"

ABSL_FLAG(std::string, rdma_device, "",
          "grpc+verbs: RDMA device (e.g. mlx5_0, rxe0); default: the first with an active port");
ABSL_FLAG(int, rdma_port, 0, "grpc+verbs: device port; 0 = the first active port");
ABSL_FLAG(int, rdma_gid_index, 0, "grpc+verbs: GID table index (RoCE: pick the RoCE v2 GID)");
ABSL_FLAG(int, rdma_mtu, 0,
          "grpc+verbs: path MTU, 256|512|1024|2048|4096; 0 = the port's active MTU");
ABSL_FLAG(int, rdma_queue_depth, 16,
          "grpc+verbs: receive slots per connection, i.e. RDMA writes in flight per direction");
ABSL_FLAG(psbench::ByteSize, rdma_slot_size, psbench::ByteSize{512 * 1024},
          "grpc+verbs: size of one receive slot; larger payloads are sent in chunks");
ABSL_FLAG(std::string, rdma_poll, "",
          "grpc+verbs: busy (spin on the completion queue, as perftest) | event (sleep on the "
          "completion channel); default: busy with --busy-poll, else event");

namespace psbench {

absl::Status ValidateRdmaOptions(const RdmaOptions& o) {
  if (o.port < 0 || o.port > 255) {
    return absl::InvalidArgumentError(absl::StrCat("--rdma-port=", o.port, " is not a port (1-255, 0 = first active)"));
  }
  if (o.gid_index < 0 || o.gid_index > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--rdma-gid-index=", o.gid_index, " is out of range"));
  }
  if (o.mtu != 0 && o.mtu != 256 && o.mtu != 512 && o.mtu != 1024 && o.mtu != 2048 &&
      o.mtu != 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdma-mtu=", o.mtu, " is not an IB MTU; use 256, 512, 1024, 2048 or 4096"));
  }
  if (o.queue_depth < 1 || o.queue_depth > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdma-queue-depth=", o.queue_depth, " must be in [1, 4096]"));
  }
  if (o.slot_bytes < 4096 || o.slot_bytes > (1ull << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdma-slot-size=", FormatSize(o.slot_bytes), " must be in [4KiB, 1GiB]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RdmaOptions> RdmaOptionsFromFlags(bool busy_poll) {
  RdmaOptions o;
  o.device = absl::GetFlag(FLAGS_rdma_device);
  o.port = absl::GetFlag(FLAGS_rdma_port);
  o.gid_index = absl::GetFlag(FLAGS_rdma_gid_index);
  o.mtu = absl::GetFlag(FLAGS_rdma_mtu);
  o.queue_depth = absl::GetFlag(FLAGS_rdma_queue_depth);
  o.slot_bytes = absl::GetFlag(FLAGS_rdma_slot_size).bytes;
  std::string poll = absl::GetFlag(FLAGS_rdma_poll);
  if (poll.empty()) {
    o.busy_poll = busy_poll;
  } else if (poll == "busy" || poll == "event") {
    o.busy_poll = poll == "busy";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdma-poll=", poll, " is not a polling mode; use busy or event"));
  }
  if (absl::Status s = ValidateRdmaOptions(o); !s.ok()) return s;
  return o;
}

std::vector<std::string> RdmaCommandLine(const RdmaOptions& o) {
  RdmaOptions d;
  std::vector<std::string> args;
  if (o.device != d.device) args.push_back("--rdma-device=" + o.device);
  if (o.port != d.port) args.push_back(absl::StrCat("--rdma-port=", o.port));
  if (o.gid_index != d.gid_index) args.push_back(absl::StrCat("--rdma-gid-index=", o.gid_index));
  if (o.mtu != d.mtu) args.push_back(absl::StrCat("--rdma-mtu=", o.mtu));
  if (o.queue_depth != d.queue_depth) {
    args.push_back(absl::StrCat("--rdma-queue-depth=", o.queue_depth));
  }
  if (o.slot_bytes != d.slot_bytes) args.push_back(absl::StrCat("--rdma-slot-size=", o.slot_bytes));
  args.push_back(absl::StrCat("--rdma-poll=", o.busy_poll ? "busy" : "event"));
  return args;
}

nlohmann::json RdmaOptionsToJson(const RdmaOptions& o) {
  return {{"device", o.device},           {"port", o.port},
          {"gid_index", o.gid_index},     {"mtu", o.mtu},
          {"queue_depth", o.queue_depth}, {"slot_bytes", o.slot_bytes},
          {"poll", o.busy_poll ? "busy" : "event"}};
}

absl::StatusOr<RdmaOptions> RdmaOptionsFromJson(const nlohmann::json& j) {
  RdmaOptions o;
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rdma: must be an object of --rdma-* settings (got ", DumpJson(j), ")"));
  }
  try {
    o.device = JsonStringField(j, "device", o.device);
    o.port = JsonIntegerField<int>(j, "port", o.port);
    o.gid_index = JsonIntegerField<int>(j, "gid_index", o.gid_index);
    o.mtu = JsonIntegerField<int>(j, "mtu", o.mtu);
    o.queue_depth = JsonIntegerField<int>(j, "queue_depth", o.queue_depth);
    o.slot_bytes = JsonIntegerField<uint64_t>(j, "slot_bytes", o.slot_bytes);
    std::string poll = JsonStringField(j, "poll", "event");
    if (poll != "busy" && poll != "event") {
      return absl::InvalidArgumentError("rdma.poll must be \"busy\" or \"event\"");
    }
    o.busy_poll = poll == "busy";
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("rdma: ", e.what()));
  } catch (const JsonFieldError& e) {
    return absl::InvalidArgumentError(absl::StrCat("rdma: ", e.what()));
  }
  if (absl::Status s = ValidateRdmaOptions(o); !s.ok()) return s;
  return o;
}

}  // namespace psbench
