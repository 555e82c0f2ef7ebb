// The PS's control plane (PsControl), served on the same completion queues as gRPC's data
// plane: GetInfo, polled start barriers, and worker sessions with their goodbyes.
#include "transports/control/control_calls.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_format.h"
#include "transports/control/barriers.h"
#include "transports/control/call_data.h"
#include "transports/control/channel.h"

namespace psbench::control {
namespace {

class InfoCall final : public CallData {
 public:
  InfoCall(wire::PsControl::AsyncService* service, grpc::ServerCompletionQueue* cq,
           const ServerOptions* options, const DataPlane* data_plane,
           const std::atomic<uint64_t>* sessions_lost)
      : service_(service), cq_(cq), options_(options), data_plane_(data_plane),
        sessions_lost_(sessions_lost), responder_(&context_) {
    service_->RequestGetInfo(&context_, &request_, &responder_, cq_, cq_, this);
  }
  void Proceed(bool ok) override {
    if (!ok || done_) {
      delete this;
      return;
    }
    new InfoCall(service_, cq_, options_, data_plane_, sessions_lost_);
    done_ = true;
    ::psbench::ServerInfo info;
    if (options_->describe_process) info = options_->describe_process();
    reply_.set_host(info.host);
    reply_.set_pid(info.pid);
    reply_.set_version(info.version);
    reply_.set_grpc_version(grpc::Version());
    reply_.set_transport(data_plane_->transport);
    reply_.set_plane(data_plane_->plane);
    reply_.set_instance(data_plane_->instance);
    if (data_plane_->describe) reply_.set_data_plane(data_plane_->describe());
    reply_.set_cpu_user_s(info.cpu_user_s);
    reply_.set_cpu_system_s(info.cpu_system_s);
    reply_.set_cpu_affinity(info.cpu_affinity);
    reply_.set_last_cpu(info.last_cpu);
    reply_.set_wall_s(info.wall_s);
    reply_.set_updates(info.updates);
    if (data_plane_->counters) {
      DataCounters c = data_plane_->counters();
      reply_.set_rpcs_served(c.rpcs);
      reply_.set_bytes_received(c.bytes);
      control::ToWire(c.moved, reply_.mutable_moved());
    }
    reply_.set_sessions_lost(sessions_lost_->load());
    responder_.Finish(reply_, grpc::Status::OK, this);
  }

 private:
  wire::PsControl::AsyncService* service_;
  grpc::ServerCompletionQueue* cq_;
  const ServerOptions* options_;
  const DataPlane* data_plane_;
  const std::atomic<uint64_t>* sessions_lost_;
  grpc::ServerContext context_;
  wire::InfoRequest request_;
  wire::ServerInfo reply_;
  grpc::ServerAsyncResponseWriter<wire::ServerInfo> responder_;
  bool done_ = false;
};

class BarrierCall final : public CallData {
 public:
  BarrierCall(wire::PsControl::AsyncService* service, grpc::ServerCompletionQueue* cq,
              Barriers* barriers)
      : service_(service), cq_(cq), barriers_(barriers), responder_(&context_) {
    service_->RequestBarrier(&context_, &request_, &responder_, cq_, cq_, this);
  }
  void Proceed(bool ok) override {
    if (!ok || done_) {
      delete this;
      return;
    }
    new BarrierCall(service_, cq_, barriers_);
    done_ = true;
    grpc::Status status = barriers_->Poll(request_, &reply_);
    if (status.ok()) {
      responder_.Finish(reply_, status, this);
    } else {
      responder_.FinishWithError(status, this);
    }
  }

 private:
  wire::PsControl::AsyncService* service_;
  grpc::ServerCompletionQueue* cq_;
  Barriers* barriers_;
  grpc::ServerContext context_;
  wire::BarrierRequest request_;
  wire::BarrierReply reply_;
  grpc::ServerAsyncResponseWriter<wire::BarrierReply> responder_;
  bool done_ = false;
};

// The worker sessions a PS holds, counted against --max-connections. gRPC 1.51 has no cap on
// incoming connections (GRPC_ARG_MAX_ALLOWED_INCOMING_CONNECTIONS came later), so the cap is
// on the sessions every psbench worker opens per PS when it connects, on every transport.
class Sessions {
 public:
  explicit Sessions(int max) : max_(max) {}
  // Whether there is room for one more; sets *id to the session's name for Goodbye.
  bool TryAdd(grpc::ServerContext* session, uint64_t* id) {
    std::lock_guard lock(mu_);
    if (static_cast<int>(open_.size()) >= max_) return false;
    // Unguessable: the id is what lets its holder say goodbye, and a goodbye said by anyone
    // else would hide the loss of the worker holding it.
    do {
      *id = absl::Uniform<uint64_t>(random_);
    } while (*id == 0 || open_.contains(*id));
    open_.emplace(*id, Open{session, false});
    return true;
  }
  // The worker ends its session normally (PsControl.Goodbye). False: no such session.
  bool Goodbye(uint64_t id) {
    std::lock_guard lock(mu_);
    auto it = open_.find(id);
    if (it == open_.end()) return false;
    it->second.goodbye = true;
    return true;
  }
  // The session's call ended: without a goodbye (and not because the PS stops), its worker
  // was lost (killed, crashed, failed or cut off).
  void Remove(uint64_t id) {
    std::lock_guard lock(mu_);
    auto it = open_.find(id);
    if (it == open_.end()) return;
    if (!it->second.goodbye && !stopping_) lost_.fetch_add(1);
    open_.erase(it);
  }
  // Ends every session (the PS is stopping), so that none holds up the shutdown.
  void CancelAll() {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [id, s] : open_) s.context->TryCancel();
  }
  int max() const { return max_; }
  // Sessions that ended without a goodbye since the PS started.
  const std::atomic<uint64_t>* lost() const { return &lost_; }

 private:
  struct Open {
    grpc::ServerContext* context;
    bool goodbye;
  };
  const int max_;
  std::atomic<uint64_t> lost_{0};
  std::mutex mu_;
  std::map<uint64_t, Open> open_;
  absl::BitGen random_;  // ids; 0: no session (a PS without sessions)
  bool stopping_ = false;
};

// PsControl.Goodbye: marks a session as ended by its worker, before the worker ends the call.
class GoodbyeCall final : public CallData {
 public:
  GoodbyeCall(wire::PsControl::AsyncService* service, grpc::ServerCompletionQueue* cq,
              Sessions* sessions)
      : service_(service), cq_(cq), sessions_(sessions), responder_(&context_) {
    service_->RequestGoodbye(&context_, &request_, &responder_, cq_, cq_, this);
  }
  void Proceed(bool ok) override {
    if (!ok || done_) {
      delete this;
      return;
    }
    new GoodbyeCall(service_, cq_, sessions_);
    done_ = true;
    if (sessions_->Goodbye(request_.session_id())) {
      responder_.Finish(reply_, grpc::Status::OK, this);
    } else {
      responder_.FinishWithError(
          grpc::Status(grpc::StatusCode::NOT_FOUND, "no open session with that id"), this);
    }
  }

 private:
  wire::PsControl::AsyncService* service_;
  grpc::ServerCompletionQueue* cq_;
  Sessions* sessions_;
  grpc::ServerContext context_;
  wire::GoodbyeRequest request_;
  wire::GoodbyeReply reply_;
  grpc::ServerAsyncResponseWriter<wire::GoodbyeReply> responder_;
  bool done_ = false;
};

// PsControl.Session: admits the worker (one reply) or refuses it, then holds the call until
// it ends. Two tags: `this` for the call's operations, `ended_` for the end of the call
// (AsyncNotifyWhenDone), which comes once the call has started, whatever happens. All events
// of a call come on its own queue, served by one thread: no locking between them.
class SessionCall final : public CallData {
 public:
  SessionCall(wire::PsControl::AsyncService* service, grpc::ServerCompletionQueue* cq,
              Sessions* sessions, uint64_t max_message_bytes)
      : service_(service), cq_(cq), sessions_(sessions), max_message_bytes_(max_message_bytes),
        writer_(&context_) {
    ended_.call = this;
    context_.AsyncNotifyWhenDone(&ended_);
    service_->RequestSession(&context_, &request_, &writer_, cq_, cq_, this);
  }

  void Proceed(bool ok) override {
    --pending_;
    if (state_ == kRequested) {
      if (!ok) {  // shutting down: the call never started, and `ended_` never comes
        delete this;
        return;
      }
      ++pending_;  // `ended_`
      new SessionCall(service_, cq_, sessions_, max_message_bytes_);
      if (sessions_->TryAdd(&context_, &id_)) {
        admitted_ = true;
        state_ = kHolding;
        reply_.set_max_message_bytes(max_message_bytes_);
        reply_.set_session_id(id_);
        ++pending_;
        writer_.Write(reply_, this);
      } else {
        state_ = kRefused;
        ++pending_;
        writer_.Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                    absl::StrFormat("the PS serves at most %d workers at once "
                                                    "(its --max-connections=%d); refusing %s",
                                                    sessions_->max(), sessions_->max(),
                                                    context_.peer())),
                       this);
      }
    }
    MaybeDelete();
  }

  void Drop(bool ok) override {
    --pending_;
    if (state_ == kRequested && ok) ++pending_;  // it started: `ended_` still comes
    state_ = kRefused;                          // no new call, no new operation
    MaybeDelete();
  }

 private:
  struct Ended final : CallData {
    SessionCall* call = nullptr;
    void Proceed(bool) override { call->OnEnded(); }
    void Drop(bool) override { call->OnEnded(); }
  };

  void OnEnded() {
    --pending_;
    if (admitted_) sessions_->Remove(id_);
    admitted_ = false;
    MaybeDelete();
  }

  void MaybeDelete() {
    if (pending_ == 0) delete this;
  }

  enum State { kRequested, kHolding, kRefused };
  wire::PsControl::AsyncService* service_;
  grpc::ServerCompletionQueue* cq_;
  Sessions* sessions_;
  const uint64_t max_message_bytes_;
  grpc::ServerContext context_;
  wire::SessionRequest request_;
  wire::SessionReply reply_;
  grpc::ServerAsyncWriter<wire::SessionReply> writer_;
  Ended ended_;
  State state_ = kRequested;
  int pending_ = 1;  // events still to come on either tag (the request first)
  bool admitted_ = false;
  uint64_t id_ = 0;
};

}  // namespace

struct ControlPlane::State {
  explicit State(int max_connections) : sessions(max_connections) {}
  Barriers barriers;
  Sessions sessions;
};

ControlPlane::ControlPlane(wire::PsControl::AsyncService* service, const ServerOptions* options,
                           const DataPlane* data_plane)
    : service_(service), options_(options), data_plane_(data_plane),
      state_(std::make_unique<State>(options->max_connections)) {}

ControlPlane::~ControlPlane() = default;

void ControlPlane::Post(grpc::ServerCompletionQueue* cq) {
  new InfoCall(service_, cq, options_, data_plane_, state_->sessions.lost());
  new BarrierCall(service_, cq, &state_->barriers);
  new SessionCall(service_, cq, &state_->sessions, options_->max_message_bytes);
  new GoodbyeCall(service_, cq, &state_->sessions);
}

void ControlPlane::CancelSessions() { state_->sessions.CancelAll(); }

}  // namespace psbench::control
