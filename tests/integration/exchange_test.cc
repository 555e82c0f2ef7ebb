// The gRPC worker's own checks of an exchange's reply, against a fake PS that answers wrongly
// (in both wire modes). What every transport must do with exchanges is in the conformance
// suite (tests/conformance/).
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "payloads/payload.h"
#include "psbench.grpc.pb.h"
#include "tests/integration/exchange_handlers.h"
#include "tests/integration/exchange_steps.h"
#include "transports/grpc/raw_format.h"
#include "transports/transport.h"

namespace psbench::testing {
namespace {

// --- the worker's own checks of a reply ---------------------------------------------------

// A PS that answers exchanges wrongly (in both wire modes): a reply buffer one byte longer
// than the request's, or checksums that do not match the reply. Nothing in a real PS does
// that, so only a fake can show that the worker checks.
class BadReplyPs final : public wire::PsControl::Service,
                         public wire::PsData::Service,
                         public grpc::CallbackGenericService {
 public:
  enum class Fault { kSizes, kChecksums };
  explicit BadReplyPs(Fault fault) : fault_(fault) {}

  std::string Start() {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(static_cast<wire::PsControl::Service*>(this));
    builder.RegisterService(static_cast<wire::PsData::Service*>(this));
    builder.RegisterCallbackGenericService(this);
    server_ = builder.BuildAndStart();
    return port > 0 ? absl::StrCat("127.0.0.1:", port) : "";
  }
  ~BadReplyPs() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  grpc::Status GetInfo(grpc::ServerContext*, const wire::InfoRequest*,
                       wire::ServerInfo* reply) override {
    reply->set_transport("grpc");
    return grpc::Status::OK;
  }

  // Serialized: the request back, damaged.
  grpc::Status Exchange(grpc::ServerContext*, const wire::PayloadMessage* request,
                        wire::PayloadMessage* reply) override {
    std::vector<std::string> buffers(request->buffers().begin(), request->buffers().end());
    std::vector<uint64_t> checksums = Damage(buffers);
    for (const auto& b : buffers) reply->add_buffers(b);
    for (uint64_t c : checksums) reply->add_checksums(c);
    return grpc::Status::OK;
  }

  // Non-serialized: the same, as raw bytes.
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor : public grpc::ServerGenericBidiReactor {
     public:
      explicit Reactor(BadReplyPs* ps) : ps_(ps) { StartRead(&request_); }
      void OnReadDone(bool ok) override {
        if (!ok) return Finish(grpc::Status(grpc::StatusCode::INTERNAL, "no request"));
        grpc_transport::SliceReader reader(request_);
        auto header = grpc_transport::ReadPayloadHeader(reader);
        if (!header.ok()) return Finish(grpc::Status(grpc::StatusCode::INTERNAL, "bad request"));
        std::vector<std::string> buffers;
        for (uint64_t size : header->sizes) {
          buffers.emplace_back(size, '\0');
          reader.Read(buffers.back().data(), size);
        }
        std::vector<uint64_t> checksums = ps_->Damage(buffers);
        std::vector<uint64_t> sizes;
        std::string flat;
        for (const auto& b : buffers) {
          sizes.push_back(b.size());
          flat += b;
        }
        flat = grpc_transport::EncodePayloadHeader(sizes, &checksums) + flat;
        grpc::Slice slice(flat);
        response_ = grpc::ByteBuffer(&slice, 1);
        StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
      }
      void OnDone() override { delete this; }

     private:
      BadReplyPs* ps_;
      grpc::ByteBuffer request_, response_;
    };
    return new Reactor(this);
  }

 private:
  // Damages the reply to be; returns the checksums to send with it.
  std::vector<uint64_t> Damage(std::vector<std::string>& buffers) {
    if (fault_ == Fault::kSizes) buffers[0].push_back('x');
    std::vector<uint64_t> checksums;
    for (const auto& b : buffers) checksums.push_back(Checksum(std::as_bytes(std::span(b))));
    if (fault_ == Fault::kChecksums) checksums.back() ^= 1;
    return checksums;
  }

  const Fault fault_;
  std::unique_ptr<grpc::Server> server_;
};

class GrpcExchangeReplyCheckTest : public ::testing::TestWithParam<WireMode> {};

TEST_P(GrpcExchangeReplyCheckTest, BadReplyIsDataLossNamingThePs) {
  for (auto fault : {BadReplyPs::Fault::kSizes, BadReplyPs::Fault::kChecksums}) {
    BadReplyPs ps(fault);
    std::string address = ps.Start();
    ASSERT_NE(address, "");
    ClientOptions co;
    co.servers = {address};
    co.mode = GetParam();
    co.validate = true;
    co.connect_timeout = absl::Seconds(10);
    auto client = MakeClient("grpc", co);
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE((*client)->Connect().ok());
    Payload request(TrainingSizes(false), 1), reply(TrainingSizes(false), 2);
    auto req = (*client)->Register(request);
    auto rep = (*client)->Register(reply);
    ASSERT_TRUE(req.ok() && rep.ok());
    (*client)->StartExchange(0, *req, *rep, 1);
    auto done = (*client)->Next(absl::Now() + absl::Seconds(30));
    ASSERT_TRUE(done.ok()) << done.status();
    const absl::Status& s = done->status;
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(s.message().find("PS " + address + ": "), std::string::npos) << s;
    EXPECT_NE(s.message().find(fault == BadReplyPs::Fault::kSizes
                                   ? "buffer 1 of the exchange reply has 17 bytes, the request's 16"
                                   : "checksum"),
              std::string::npos)
        << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, GrpcExchangeReplyCheckTest,
                         ::testing::Values(WireMode::kNonSerialized, WireMode::kSerialized),
                         [](const auto& info) {
                           return info.param == WireMode::kSerialized ? std::string("Serialized")
                                                                      : std::string("NonSerialized");
                         });

}  // namespace
}  // namespace psbench::testing
