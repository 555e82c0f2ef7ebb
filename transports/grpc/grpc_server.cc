// PS side of the gRPC transport: the raw (non-serialized) and serialized methods, all through
// the generic service (answered by DataResponder), on either of gRPC's server APIs:
// completion-queue calls served on the control server's threads beside the control plane (no
// call hops between pools), or callback reactors run by gRPC's own threads (--grpc-api).
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_builder.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "transports/control/control_server.h"
#include "transports/control/tsan_handoff.h"
#include "transports/exchange.h"
#include "transports/grpc/data_responder.h"
#include "transports/grpc/grpc_transport.h"
#include "transports/grpc/server_calls.h"

namespace psbench::grpc_transport {
namespace {

using control::TagTakenFromQueue;

// A data call on the completion-queue API. Every data method, raw and serialized, comes
// through the generic service: a serialized request is counted before protobuf parses it
// (ParseSerializedRequest), so what it costs the PS is bounded before anything is allocated
// for it, as the raw header's count bounds a raw one.
class DataCall final : public CallData {
 public:
  DataCall(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* cq, DataResponder* responder)
      : service_(service), cq_(cq), responder_(responder), stream_(&context_) {
    service_->RequestCall(&context_, &stream_, cq_, cq_, this);
  }

  void Proceed(bool ok) override {
    switch (state_) {
      case kRequested:
        if (!ok) {  // server shutting down
          delete this;
          return;
        }
        new DataCall(service_, cq_, responder_);
        state_ = kReading;
        stream_.Read(&request_, this);
        return;
      case kReading:
        state_ = kFinishing;
        if (!ok) {
          // No request message: the client half-closed without one, or went away. Either
          // way it is answered (a client still there would otherwise wait out its deadline).
          stream_.Finish(ToGrpc(absl::InvalidArgumentError(absl::StrCat(
                             context_.method(), ": the call ended without a request message"))),
                         this);
          return;
        }
        // This call stays alive until its Finish completes and nothing else finishes it, so
        // `this` is safe to use until then; the answer may come from another thread.
        responder_->Respond(context_.method(), &request_, [this](const grpc::Status& s, grpc::ByteBuffer* reply) {
          if (reply != nullptr) response_.Swap(reply);
          StartFromAnotherThread(this, [&] {
            if (s.ok()) {
              stream_.WriteAndFinish(response_, grpc::WriteOptions(), grpc::Status::OK, this);
            } else {
              stream_.Finish(s, this);
            }
          });
        });
        return;
      case kFinishing:
        delete this;
        return;
    }
  }

 private:
  enum State { kRequested, kReading, kFinishing };
  grpc::AsyncGenericService* service_;
  grpc::ServerCompletionQueue* cq_;
  DataResponder* responder_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  State state_ = kRequested;
};

// A data call on the callback API: gRPC's threads run the reactor; it reads the one request,
// hands it to the responder and writes the answer. TSan cannot see the ordering that gRPC's
// (uninstrumented) threads provide, hence the hand-off annotations around every operation.
class DataReactor final : public grpc::ServerGenericBidiReactor {
 public:
  DataReactor(grpc::GenericCallbackServerContext* context, DataResponder* responder)
      : context_(context), responder_(responder) {
    StartFromAnotherThread(this, [&] { StartRead(&request_); });
  }

  void OnReadDone(bool ok) override {
    TagTakenFromQueue(this);
    if (!ok) {
      EndWith(ToGrpc(absl::InvalidArgumentError(
          absl::StrCat(context_->method(), ": the call ended without a request message"))));
      return;
    }
    responder_->Respond(context_->method(), &request_, [this](const grpc::Status& s, grpc::ByteBuffer* reply) {
      if (reply == nullptr) {
        EndWith(s);
        return;
      }
      response_.Swap(reply);
      StartFromAnotherThread(this, [&] { StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK); });
    });
  }

  void OnDone() override {
    TagTakenFromQueue(this);
    delete this;
  }

 private:
  void EndWith(const grpc::Status& s) {
    StartFromAnotherThread(this, [&] { Finish(s); });
  }

  grpc::GenericCallbackServerContext* context_;
  DataResponder* responder_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

class CallbackDataService final : public grpc::CallbackGenericService {
 public:
  explicit CallbackDataService(DataResponder* responder) : responder_(responder) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* context) override {
    return new DataReactor(context, responder_);
  }

 private:
  DataResponder* responder_;
};

// gRPC's data plane on the PS's gRPC server: its services and calls, its counters, and the
// exchanges it serves; the server (control_) serves them beside the control plane.
class GrpcServer final : public Server {
 public:
  explicit GrpcServer(const ServerOptions& options) {
    counters_.corrupt_every = options.corrupt_every;
    exchanges_.hub = ExchangeHub::Create(options.exchange_handler);
    exchanges_.pool = BlockPool::Create();
    control::DataPlane data_plane;
    data_plane.transport = "grpc";
    data_plane.describe = [api = options.grpc_api] {
      return api == GrpcApi::kCallback ? std::string("gRPC over TCP (callback API)") : std::string("gRPC over TCP");
    };
    data_plane.counters = [this] {
      const DataCounts moved = counters_.moved.Read();
      return control::DataCounters{counters_.rpcs.load(), moved.payload_bytes_received, moved};
    };
    if (options.grpc_api == GrpcApi::kCallback) {
      data_plane.callback_generic = &callback_service_;
    } else {
      data_plane.generic = &data_service_;
      data_plane.post = [this](grpc::ServerCompletionQueue* cq) {
        // Several calls are posted per queue so a burst never waits for a post.
        for (int i = 0; i < 16; ++i) new DataCall(&data_service_, cq, &responder_);
      };
    }
    // Later answers from the handler do nothing; what it still holds fails now.
    data_plane.on_stop = [this] { exchanges_.hub->Close(ExchangeCancelledError()); };
    control_ = std::make_unique<control::ControlServer>(options, std::move(data_plane));
  }

  // The server's threads end before the services, counters and exchanges they use.
  ~GrpcServer() override { control_.reset(); }

  absl::StatusOr<int> Start() override { return control_->Start(); }
  void Wait() override { control_->Wait(); }
  void Shutdown() override { control_->Shutdown(); }

 private:
  Counters counters_;
  Exchanges exchanges_;
  DataResponder responder_{&counters_, &exchanges_};
  grpc::AsyncGenericService data_service_;
  CallbackDataService callback_service_{&responder_};
  std::unique_ptr<control::ControlServer> control_;
};

}  // namespace

std::unique_ptr<Server> NewGrpcServer(const ServerOptions& options) {
  return std::make_unique<GrpcServer>(options);
}

}  // namespace psbench::grpc_transport
