// The cases of the conformance suite (conformance.h): echo and push move every byte and are
// counted, also in payloads of thousands of buffers; --validate catches damage on either side;
// many payloads in flight each complete once; a PS that stops fails what comes after, naming
// it; barriers; sessions against --max-connections; exchanges (immediate, held for a
// synchronous step, refused, failed, dropped, damaged, malformed, cancelled by a shutdown).
#include <future>
#include <set>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "payloads/payload.h"
#include "tests/conformance/conformance.h"
#include "tests/integration/exchange_steps.h"

namespace psbench::testing::conformance {

ExchangeHandler* Pick(Handlers& h, Handler which) {
  switch (which) {
    case Handler::kNone: return nullptr;
    case Handler::kAddOne: return &h.add_one;
    case Handler::kSync: return &h.sync;
    case Handler::kHolding: return &h.holding;
    case Handler::kFailing: return &h.failing;
    case Handler::kDropping: return &h.dropping;
  }
  return nullptr;
}

ServerOptions PsOptions(const Case& c, Handlers& handlers) {
  ServerOptions so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.threads = 2;
  so.exchange_handler = Pick(handlers, c.handler);
  so.corrupt_every = c.corrupt_every;
  so.max_connections = c.max_connections;
  so.max_message_bytes = c.max_message_bytes;
  return so;
}

std::string Worker::Ps(size_t i) const {
  return client_ == nullptr ? "PS ?" : absl::StrCat("PS ", client_->server_address(i));
}

namespace {

// Why a case needs workers and PS that are threads of one process.
constexpr char kRejoins[] =
    "a grpc+mpi worker is a rank that joins its MPI job once: it cannot leave and come back";
constexpr char kPsLeaves[] =
    "a grpc+mpi PS that leaves its MPI job ends the job (mpi_transport_test's KilledPs and "
    "StoppedPs cases)";

// Sizes that cross every framing boundary: a byte, a cache line, a page, a megabyte and more.
const std::vector<uint64_t> kMixed = {1, 63, 4096, 65536, (1 << 20) + 3};
// Small enough that a transport may send it with its request (grpc+mpi's eager messages),
// with an empty buffer among the others.
const std::vector<uint64_t> kSmall = {1, 31, 0, 200};

// Thousands of buffers of 0, 4 and 8 bytes: their metadata, with checksums, is larger than a
// transport's control message (grpc+mpi sends it after its header, on the request's tag).
const std::vector<uint64_t> kMany = [] {
  std::vector<uint64_t> sizes;
  for (int i = 0; i < 6000; ++i) sizes.push_back(4 * static_cast<uint64_t>(i % 3));
  return sizes;
}();

uint64_t Total(const std::vector<uint64_t>& sizes) {
  uint64_t t = 0;
  for (uint64_t s : sizes) t += s;
  return t;
}

// One exchange of a small training payload with PS 0: its status.
absl::Status OneExchange(Worker& w) {
  Client* client = w.Connect(true);
  if (client == nullptr) return absl::UnavailableError("no client");
  Payload request(TrainingSizes(false), 1), reply(TrainingSizes(false), 2);
  auto req = client->Register(request);
  auto rep = client->Register(reply);
  if (!req.ok() || !rep.ok()) return absl::InternalError("register failed");
  return ExchangeOnce(*client, *req, *rep);
}

// Both sides' data planes counted exactly the payload bytes that moved since `before` (a fresh
// PS: since it started): `sent` from the worker, `back` to it; the PS serves the worker's
// plane; a worker of another plane than gRPC made no gRPC payload call.
void ExpectPlanesCounted(Client& client, const ClientCounts& before, const ServerInfo& info, uint64_t sent,
                         uint64_t back) {
  const ClientCounts now = client.Counts();
  const DataCounts worker = now.data - before.data;
  EXPECT_EQ(worker.payload_bytes_sent, sent) << now.plane;
  EXPECT_EQ(worker.payload_bytes_received, back) << now.plane;
  EXPECT_GE(worker.bytes_sent, sent);
  EXPECT_GE(worker.bytes_received, back);
  EXPECT_GT(worker.messages_sent, 0u);
  EXPECT_EQ(info.plane, now.plane);
  EXPECT_EQ(info.moved.payload_bytes_received, sent) << info.plane;
  EXPECT_EQ(info.moved.payload_bytes_sent, back) << info.plane;
  EXPECT_GE(info.moved.bytes_received, sent);
  EXPECT_GE(info.moved.bytes_sent, back);
  if (now.plane != "grpc") EXPECT_EQ(now.grpc_payload - before.grpc_payload, DataCounts{}) << now.plane;
}

// --- echo and push ----------------------------------------------------------------------------

void EchoAndPush(Worker& w) {
  Client* client = w.Connect(/*validate=*/true);
  ASSERT_NE(client, nullptr);
  const ClientCounts before = client->Counts();
  for (const auto* sizes : {&kMixed, &kSmall}) {
    Payload p(*sizes, 11);
    auto id = client->Register(p);
    ASSERT_TRUE(id.ok()) << id.status();
    for (Op op : {Op::kEcho, Op::kPush, Op::kEcho, Op::kPush}) {
      client->Start(op, 0, *id, 5);
      auto done = client->Next(absl::Now() + absl::Seconds(30));
      ASSERT_TRUE(done.ok()) << done.status();
      EXPECT_EQ(done->tag, 5u);
      EXPECT_TRUE(done->status.ok()) << Total(*sizes) << " bytes: " << done->status;
    }
    client->Unregister(*id);
  }
  auto info = client->GetInfo(0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->rpcs_served, 8u);
  EXPECT_EQ(info->bytes_received, 4 * Total(kMixed) + 4 * Total(kSmall));
  EXPECT_EQ(info->sessions_lost, 0u);
  // Half the operations were echoes: half the bytes came back.
  ExpectPlanesCounted(*client, before, *info, 4 * Total(kMixed) + 4 * Total(kSmall),
                      2 * Total(kMixed) + 2 * Total(kSmall));
}

// A payload of thousands of buffers: echo, push and exchange move every byte to its place.
void ThousandsOfBuffers(Worker& w) {
  Client* client = w.Connect(/*validate=*/true);
  ASSERT_NE(client, nullptr);
  Payload p(kMany, 13), request(kMany, 1), reply(kMany, 2);
  auto id = client->Register(p);
  auto req = client->Register(request);
  auto rep = client->Register(reply);
  ASSERT_TRUE(id.ok() && req.ok() && rep.ok());
  const ClientCounts before = client->Counts();
  for (Op op : {Op::kEcho, Op::kPush}) {
    client->Start(op, 0, *id, 3);
    auto done = client->Next(absl::Now() + absl::Seconds(30));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_TRUE(done->status.ok()) << (op == Op::kPush ? "push: " : "echo: ") << done->status;
  }
  FillFloats(request, 5);
  ASSERT_TRUE(ExchangeOnce(*client, *req, *rep).ok());
  EXPECT_EQ(CompareFloats(request, reply, [](float x) { return x + 1; }), "");
  auto info = client->GetInfo(0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->rpcs_served, 3u);
  EXPECT_EQ(info->bytes_received, 3 * Total(kMany));
  ExpectPlanesCounted(*client, before, *info, 3 * Total(kMany), 2 * Total(kMany));  // echo and exchange
}

// --validate: a push damaged on the way is caught by the PS, an echo damaged on the way back
// by the worker; both DATA_LOSS naming the PS.
void ValidationCatchesDamage(Worker& w) {
  Client* client = w.Connect(/*validate=*/true);
  ASSERT_NE(client, nullptr);
  for (const auto* sizes : {&kMixed, &kSmall}) {
    Payload p(*sizes, 12);
    auto id = client->Register(p);
    ASSERT_TRUE(id.ok());
    for (Op op : {Op::kPush, Op::kEcho}) {
      client->Start(op, 0, *id, 1);
      auto done = client->Next(absl::Now() + absl::Seconds(30));
      ASSERT_TRUE(done.ok()) << done.status();
      EXPECT_EQ(done->status.code(), absl::StatusCode::kDataLoss)
          << Total(*sizes) << " bytes, " << (op == Op::kPush ? "push: " : "echo: ") << done->status;
      EXPECT_TRUE(absl::StartsWith(done->status.message(), w.Ps(0))) << done->status;
    }
    client->Unregister(*id);
  }
}

// 64 operations in flight over two PS, echo and push mixed: each completes once, well.
void ManyInFlight(Worker& w) {
  Client* client = w.Connect(/*validate=*/true);
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(client->num_servers(), 2u);
  Payload small(std::vector<uint64_t>{10, 10240}, 1), large(std::vector<uint64_t>{1 << 20, 100}, 2);
  auto s = client->Register(small);
  auto l = client->Register(large);
  ASSERT_TRUE(s.ok() && l.ok());
  constexpr int kOps = 64;
  for (int i = 0; i < kOps; ++i) {
    client->Start(i % 3 == 0 ? Op::kPush : Op::kEcho, i % 2, i % 4 == 0 ? *l : *s, 1000 + i);
  }
  std::multiset<uint64_t> tags;
  for (int i = 0; i < kOps; ++i) {
    auto done = client->Next(absl::Now() + absl::Seconds(30));
    ASSERT_TRUE(done.ok()) << "after " << i << ": " << done.status();
    EXPECT_TRUE(done->status.ok()) << done->status;
    tags.insert(done->tag);
  }
  for (int i = 0; i < kOps; ++i) EXPECT_EQ(tags.count(1000 + i), 1u) << i;
  EXPECT_EQ(client->Next(absl::Now() + absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded)
      << "no completion beyond the operations started";
}

// A PS that stops: what is asked of it afterwards fails, naming it, within the deadline.
void AfterThePsStops(Worker& w) {
  Client* client = w.Connect(/*validate=*/false);
  ASSERT_NE(client, nullptr);
  Payload p(std::vector<uint64_t>{4096}, 3);
  auto id = client->Register(p);
  ASSERT_TRUE(id.ok());
  client->Start(Op::kEcho, 0, *id, 1);
  ASSERT_TRUE(client->Next(absl::Now() + absl::Seconds(30)).ok());
  w.StopServer(0);
  for (Op op : {Op::kEcho, Op::kPush}) {
    client->Start(op, 0, *id, 2);
    auto done = client->Next(absl::Now() + absl::Seconds(40));
    ASSERT_TRUE(done.ok()) << "no completion: the worker would hang";
    EXPECT_FALSE(done->status.ok());
    EXPECT_NE(done->status.message().find(client->server_address(0)), std::string::npos)
        << done->status;
  }
}

// --- control plane ----------------------------------------------------------------------------

// Every worker at barrier "start" is released; then worker 0, alone at a barrier of two, is
// told so at its deadline, and an index outside the barrier is refused.
void Barriers(Worker& w) {
  Client* client = w.Connect(true);
  ASSERT_NE(client, nullptr);
  absl::Status all = client->Barrier("start", w.workers(), w.index(), absl::Now() + absl::Seconds(30));
  EXPECT_TRUE(all.ok()) << all;
  if (w.index() != 0) return;
  absl::Status alone = client->Barrier("alone", 2, 0, absl::Now() + absl::Milliseconds(300));
  EXPECT_EQ(alone.code(), absl::StatusCode::kDeadlineExceeded) << alone;
  EXPECT_NE(alone.message().find("only 1 of the 2 workers"), std::string::npos) << alone;
  absl::Status outside = client->Barrier("bad", 2, 5, absl::Now() + absl::Seconds(5));
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument) << outside;
}

// --max-connections counts worker sessions: one too many is refused naming the limit, and a
// worker that leaves frees its place.
void SessionsAgainstMaxConnections(Worker& w) {
  ASSERT_NE(w.Connect(true), nullptr);
  auto second = w.MakeAnother(true);
  ASSERT_NE(second, nullptr);
  absl::Status refused = second->Connect();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("--max-connections=1"), std::string::npos) << refused;
  w.Disconnect();
  absl::Status admitted;
  for (auto until = absl::Now() + absl::Seconds(10); absl::Now() < until;) {
    auto again = w.MakeAnother(true);
    ASSERT_NE(again, nullptr);
    if ((admitted = again->Connect()).ok()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(admitted.ok()) << admitted;
}

// --- exchanges --------------------------------------------------------------------------------

// Two workers, one with --validate and one without, four steps each with new gradients (with
// validate, checksums are of the bytes as sent); then the PS's count of both.
void ImmediateAnswer(Worker& w) {
  Client* client = w.Connect(/*validate=*/w.index() == 0);
  ASSERT_NE(client, nullptr);
  Payload request(TrainingSizes(/*large=*/true), 1), reply(TrainingSizes(true), 2);
  auto req = client->Register(request);
  auto rep = client->Register(reply);
  ASSERT_TRUE(req.ok() && rep.ok());
  for (int step = 0; step < 4; ++step) {
    FillFloats(request, static_cast<float>(step * 10 + w.index()));
    ASSERT_TRUE(ExchangeOnce(*client, *req, *rep).ok()) << "step " << step;
    EXPECT_EQ(CompareFloats(request, reply, [](float x) { return x + 1; }), "") << step;
  }
  absl::Status both = client->Barrier("counted", w.workers(), w.index(), absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(both.ok()) << both;
  if (w.index() != 0) return;
  auto info = client->GetInfo(0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->rpcs_served, 8u);
  EXPECT_EQ(info->bytes_received, 8 * request.total_bytes());
}

void ImmediateAnswerCounted(Handlers& h) {
  EXPECT_EQ(h.add_one.calls(), 8);
  // The handler writes its reply where the request lies (pooled memory, or the message's own
  // strings): no copy between them.
  EXPECT_TRUE(h.add_one.aliased());
}

// The handler holds every request of a step until the last worker's is in, then answers all
// from another thread.
void SynchronousStep(Worker& w) {
  Client* client = w.Connect(true);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(SyncSumWorker(*client, TrainingSizes(true), w.index(), w.workers(), 4), "")
      << "worker " << w.index();
}

void SynchronousStepHeld(Handlers& h) {
  EXPECT_EQ(h.sync.steps(), 4);
  EXPECT_EQ(h.sync.max_held(), static_cast<size_t>(kSyncWorkers));
}

void WithoutHandler(Worker& w) {
  Client* client = w.Connect(true);
  ASSERT_NE(client, nullptr);
  Payload request(TrainingSizes(false), 1), reply(TrainingSizes(false), 2);
  auto req = client->Register(request);
  auto rep = client->Register(reply);
  ASSERT_TRUE(req.ok() && rep.ok());
  for (int i = 0; i < 2; ++i) {
    absl::Status s = ExchangeOnce(*client, *req, *rep);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_TRUE(absl::StartsWith(s.message(), w.Ps(0))) << s;
    EXPECT_NE(s.message().find("does not serve exchanges"), std::string::npos) << s;
    // The PS serves on.
    for (Op op : {Op::kEcho, Op::kPush}) {
      client->Start(op, 0, *req, 1);
      auto done = client->Next(absl::Now() + absl::Seconds(30));
      ASSERT_TRUE(done.ok());
      EXPECT_TRUE(done->status.ok()) << done->status;
    }
  }
}

// A message over the PS's --max-message-size never gets through: the client knows the limit
// and refuses the payload itself (INVALID_ARGUMENT, at Register), or the PS refuses the
// request (RESOURCE_EXHAUSTED); either names the limit, and the PS serves on.
constexpr uint64_t kSmallLimit = 64 << 10;

void OversizedMessage(Worker& w) {
  Client* client = w.Connect(true);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->max_message_bytes(0), kSmallLimit) << "the limit the PS told the client";
  Payload big(std::vector<uint64_t>{kSmallLimit / 2, kSmallLimit / 2 + 1}, 3), small(kSmall, 4);
  auto small_id = client->Register(small);
  ASSERT_TRUE(small_id.ok()) << small_id.status();
  for (Op op : {Op::kPush, Op::kEcho}) {
    auto big_id = client->Register(big);
    absl::Status refused;
    if (!big_id.ok()) {
      refused = big_id.status();
      EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    } else {
      client->Start(op, 0, *big_id, 1);
      auto done = client->Next(absl::Now() + absl::Seconds(30));
      ASSERT_TRUE(done.ok()) << done.status();
      refused = done->status;
      EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
      client->Unregister(*big_id);
    }
    EXPECT_NE(refused.message().find("--max-message-size=64KiB"), std::string::npos) << refused;
    client->Start(op, 0, *small_id, 2);
    auto done = client->Next(absl::Now() + absl::Seconds(30));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_TRUE(done->status.ok()) << "the PS serves on: " << done->status;
  }
}

void HandlerError(Worker& w) {
  absl::Status s = OneExchange(w);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(absl::StartsWith(s.message(), w.Ps(0))) << s;
  EXPECT_TRUE(absl::EndsWith(s.message(), ": optimizer state does not fit")) << s;
}

void DroppedAnswer(Worker& w) {
  absl::Status s = OneExchange(w);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("dropped the exchange unanswered"), std::string::npos) << s;
}

void MismatchedPayloads(Worker& w) {
  Client* client = w.Connect(true);
  ASSERT_NE(client, nullptr);
  Payload request(TrainingSizes(false), 1), shorter(std::vector<uint64_t>{16, 4096, 40}, 2),
      resized(std::vector<uint64_t>{16, 4096, 44, 65536}, 3), reply(TrainingSizes(false), 4);
  auto req = client->Register(request);
  auto s1 = client->Register(shorter);
  auto s2 = client->Register(resized);
  auto rep = client->Register(reply);
  ASSERT_TRUE(req.ok() && s1.ok() && s2.ok() && rep.ok());
  for (int bad : {*s1, *s2, 99, -1}) {
    absl::Status s = ExchangeOnce(*client, *req, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  EXPECT_EQ(ExchangeOnce(*client, 42, *req).code(), absl::StatusCode::kInvalidArgument);
  client->StartExchange(5, *req, *req, 1);  // no PS 5
  auto done = client->Next(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->status.code(), absl::StatusCode::kInvalidArgument) << done->status;
  client->Start(Op::kExchange, 0, *req, 1);  // no reply payload
  done = client->Next(absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->status.code(), absl::StatusCode::kInvalidArgument) << done->status;
  // None of that reached the PS; a good exchange still works.
  absl::Status good = ExchangeOnce(*client, *req, *rep);
  EXPECT_TRUE(good.ok()) << good;
}

// --validate: the PS checks a damaged request before its handler sees it.
void CorruptedRequest(Worker& w) {
  Client* client = w.Connect(/*validate=*/true);
  ASSERT_NE(client, nullptr);
  Payload request(TrainingSizes(true), 1), reply(TrainingSizes(true), 2);
  auto req = client->Register(request);
  auto rep = client->Register(reply);
  ASSERT_TRUE(req.ok() && rep.ok());
  absl::Status s = ExchangeOnce(*client, *req, *rep);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(absl::StartsWith(s.message(), w.Ps(0))) << s;
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s;
}

// A PS that shuts down while its handler holds exchanges cancels them, naming itself; answers
// that come after it is gone write their replies and do nothing else.
void HeldExchangeIsCancelled(Worker& w) {
  Client* client = w.Connect(true);
  ASSERT_NE(client, nullptr);
  Payload request(TrainingSizes(w.index() == 1), 1), reply(TrainingSizes(w.index() == 1), 2);
  auto req = client->Register(request);
  auto rep = client->Register(reply);
  ASSERT_TRUE(req.ok() && rep.ok());
  client->StartExchange(0, *req, *rep, 1);
  // Next drives the transports that send from the worker's own thread (grpc+verbs, grpc+mpi).
  auto done = client->Next(absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_FALSE(done->status.ok()) << "an exchange completed while its handler held it";
  EXPECT_TRUE(absl::StartsWith(done->status.message(), w.Ps(0))) << done->status;
}

void ShutDownWhileHeld(PsSide& ps) {
  ASSERT_TRUE(ps.handlers().holding.WaitHeld(2, std::chrono::seconds(60)))
      << "the exchanges never arrived";
  auto stopped = std::async(std::launch::async, [&ps] { ps.Stop(); });
  ASSERT_EQ(stopped.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "Shutdown hangs on held exchanges";
}

void NeverHandled(Handlers& h) { EXPECT_EQ(h.add_one.calls(), 0); }

void AnswerAfterShutdown(Handlers& h) { h.holding.AnswerAll(absl::OkStatus()); }

std::vector<Case> MakeCases() {
  std::vector<Case> c;
  c.push_back({.name = "EchoAndPushMoveEveryByteAndAreCounted", .worker = EchoAndPush});
  c.push_back({.name = "ValidationCatchesDamageOnEitherSide", .corrupt_every = 1,
               .worker = ValidationCatchesDamage});
  c.push_back({.name = "ThousandsOfBuffersMoveEveryByte", .handler = Handler::kAddOne,
               .worker = ThousandsOfBuffers, .after = [](Handlers& h) { EXPECT_EQ(h.add_one.calls(), 1); }});
  c.push_back({.name = "ManyPayloadsInFlightEachCompleteOnce", .servers = 2,
               .worker = ManyInFlight});
  c.push_back({.name = "AfterThePsStopsItsOperationsFailNamingIt", .in_process_only = kPsLeaves,
               .worker = AfterThePsStops});
  c.push_back({.name = "BarrierReleasesWhenEveryWorkerArrived", .workers = 3, .worker = Barriers});
  c.push_back({.name = "SessionsAreCountedAgainstMaxConnections", .max_connections = 1,
               .in_process_only = kRejoins, .worker = SessionsAgainstMaxConnections});
  c.push_back({.name = "ImmediateAnswerLandsInTheReplyPayload", .workers = 2,
               .handler = Handler::kAddOne, .worker = ImmediateAnswer,
               .after = ImmediateAnswerCounted});
  c.push_back({.name = "SynchronousStepAnswersEveryWorkerLater", .workers = kSyncWorkers,
               .handler = Handler::kSync, .worker = SynchronousStep,
               .after = SynchronousStepHeld});
  c.push_back({.name = "OversizedMessageIsRefusedAndThePsServesOn", .max_message_bytes = kSmallLimit,
               .worker = OversizedMessage});
  c.push_back({.name = "WithoutHandlerExchangesFailAndThePsServesOn", .worker = WithoutHandler});
  c.push_back({.name = "HandlerErrorIsPrefixedWithThePsAddress", .handler = Handler::kFailing,
               .worker = HandlerError});
  c.push_back({.name = "DroppedAnswerIsAnInternalError", .handler = Handler::kDropping,
               .worker = DroppedAnswer});
  c.push_back({.name = "MismatchedOrUnknownPayloadsAreInvalidArgument",
               .handler = Handler::kAddOne, .worker = MismatchedPayloads,
               .after = [](Handlers& h) { EXPECT_EQ(h.add_one.calls(), 1); }});
  c.push_back({.name = "CorruptedRequestIsDataLoss", .handler = Handler::kAddOne,
               .corrupt_every = 1, .worker = CorruptedRequest, .after = NeverHandled});
  c.push_back({.name = "ShutdownCancelsHeldExchanges", .workers = 2,
               .handler = Handler::kHolding, .worker = HeldExchangeIsCancelled,
               .during = ShutDownWhileHeld, .after = AnswerAfterShutdown});
  return c;
}

}  // namespace

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = MakeCases();
  return cases;
}

const Case* FindCase(const std::string& name) {
  for (const Case& c : Cases()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace psbench::testing::conformance
