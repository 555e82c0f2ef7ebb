#include "transports/loopback/loopback.h"

#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "payloads/size.h"
#include "transports/exchange.h"

namespace psbench::loopback {
namespace {

constexpr char kScheme[] = "loopback:";

absl::Status Prefixed(const std::string& address, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("PS ", address, ": ", s.message()));
}

// What an op hands back, reaped by Client::Next on the client's own thread: the bytes it
// returns are copied into the caller's payloads there, never from a PS thread.
struct Done {
  uint64_t tag = 0;
  absl::Status status;
  const Payload* echo_of = nullptr;               // echo: the payload sent
  std::vector<std::vector<std::byte>> echoed;     // echo: the bytes the PS sent back
  std::shared_ptr<ExchangeBuffers> exchange;      // exchange: the PS's reply
  const Payload* reply_to = nullptr;              // exchange: where it goes
  const Payload* request = nullptr;               // exchange: what was sent
  std::string address;                            // the PS, for messages

  static Done Of(uint64_t tag, absl::Status status = absl::OkStatus()) {
    Done d;
    d.tag = tag;
    d.status = std::move(status);
    return d;
  }
};

// A client's completion queue, shared with the PS threads that answer its ops.
class Completions {
 public:
  void Push(Done d) {
    {
      std::lock_guard lock(mu_);
      ready_.push_back(std::move(d));
    }
    cv_.notify_one();
  }
  std::optional<Done> Pop(absl::Time deadline) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_until(lock, absl::ToChronoTime(deadline), [this] { return !ready_.empty(); })) {
      return std::nullopt;
    }
    Done d = std::move(ready_.front());
    ready_.pop_front();
    return d;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Done> ready_;
};

// One PS: what it counts, its sessions and barriers, and the threads that serve its ops.
class Core {
 public:
  Core(const ServerOptions& options, int n)
      : options_(options), address_(absl::StrCat(kScheme, n)),
        hub_(ExchangeHub::Create(options.exchange_handler)), pool_(BlockPool::Create()) {}

  const std::string& address() const { return address_; }
  const ServerOptions& options() const { return options_; }
  ExchangeHub& hub() { return *hub_; }
  BlockPool& pool() { return *pool_; }

  void StartThreads() {
    for (int i = 0; i < std::max(1, options_.threads); ++i) threads_.emplace_back([this] { Serve(); });
  }

  // Runs `task(serving)` on a serving thread: serving false once the PS stops (the task then
  // fails its op). False when the PS has stopped already.
  bool Post(std::function<void(bool serving)> task) {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return false;
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
    return true;
  }

  // Fault injection (ServerOptions::corrupt_every): whether this payload is damaged.
  bool ShouldCorrupt() {
    return options_.corrupt_every > 0 && (received_.fetch_add(1) + 1) % options_.corrupt_every == 0;
  }
  void Count(uint64_t bytes) {
    rpcs_.fetch_add(1);
    moved_->Received(bytes, bytes);  // GetInfo's bytes_received is its payload bytes
  }
  // Where echoes' and exchanges' answers are counted as they are handed back (an exchange's
  // perhaps after the server stopped).
  const std::shared_ptr<DataTally>& moved() { return moved_; }

  absl::Status Admit(uint64_t* session) {
    std::lock_guard lock(mu_);
    if (static_cast<int>(sessions_.size()) >= options_.max_connections) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "PS %s: the PS serves at most %d workers at once (its --max-connections=%d)", address_,
          options_.max_connections, options_.max_connections));
    }
    *session = next_session_++;
    sessions_.insert(*session);
    return absl::OkStatus();
  }
  void Leave(uint64_t session, bool goodbye) {
    std::lock_guard lock(mu_);
    if (sessions_.erase(session) > 0 && !goodbye && !stopped_) ++sessions_lost_;
  }

  ServerInfo Info() {
    ServerInfo info = options_.describe_process ? options_.describe_process() : ServerInfo{};
    info.address = address_;
    if (info.pid == 0) info.pid = getpid();
    info.transport = "loopback";
    info.data_plane = "memcpy in this process";
    info.rpcs_served = rpcs_.load();
    info.plane = "loopback";
    info.moved = moved_->Read();
    info.bytes_received = info.moved.payload_bytes_received;
    std::lock_guard lock(mu_);
    info.sessions_lost = sessions_lost_;
    return info;
  }

  absl::Status Barrier(const std::string& name, int parties, int index, absl::Time deadline) {
    if (parties < 1 || index < 0 || index >= parties) {
      return absl::InvalidArgumentError(absl::StrFormat("PS %s: barrier '%s': worker index %d is outside [0, %d)",
                                                        address_, name, index, parties));
    }
    std::unique_lock lock(mu_);
    Round& b = barriers_[name];
    if (b.waiting.empty()) b.parties = parties;
    if (b.parties != parties) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "PS %s: barrier '%s' waits for %d workers, this one says %d", address_, name, b.parties, parties));
    }
    if (!b.waiting.insert(index).second) {
      return absl::AlreadyExistsError(absl::StrFormat(
          "PS %s: two live workers use --worker-index=%d at barrier '%s'", address_, index, name));
    }
    const uint64_t round = b.round;
    if (static_cast<int>(b.waiting.size()) == parties) {
      b.waiting.clear();
      ++b.round;
      barrier_cv_.notify_all();
      return absl::OkStatus();
    }
    if (barrier_cv_.wait_until(lock, absl::ToChronoTime(deadline), [&] { return b.round != round || stopped_; }) &&
        b.round != round) {
      return absl::OkStatus();
    }
    const size_t arrived = b.waiting.size();
    std::vector<int> missing;
    for (int i = 0; i < parties && missing.size() < 32; ++i) {
      if (!b.waiting.contains(i)) missing.push_back(i);
    }
    b.waiting.erase(index);
    return absl::DeadlineExceededError(
        BarrierWaitText(name, static_cast<int>(arrived), parties, address_, missing));
  }

  // Stops serving: held exchanges are cancelled, queued ops fail, the threads end.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    hub_->Close(ExchangeCancelledError());
    cv_.notify_all();
    barrier_cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  struct Round {
    int parties = 0;
    uint64_t round = 0;
    std::set<int> waiting;
  };

  void Serve() {
    while (true) {
      std::function<void(bool)> task;
      bool serving;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stopped_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        serving = !stopped_;
      }
      task(serving);
    }
  }

  const ServerOptions options_;
  const std::string address_;
  std::shared_ptr<ExchangeHub> hub_;
  std::shared_ptr<BlockPool> pool_;
  std::atomic<uint64_t> rpcs_{0};
  std::shared_ptr<DataTally> moved_ = std::make_shared<DataTally>(DataTally::kManyWriters);
  std::atomic<int64_t> received_{0};
  std::mutex mu_;
  std::condition_variable cv_, barrier_cv_;
  std::deque<std::function<void(bool)>> tasks_;
  bool stopped_ = false;
  std::set<uint64_t> sessions_;
  uint64_t next_session_ = 1;
  uint64_t sessions_lost_ = 0;
  std::map<std::string, Round> barriers_;
  std::vector<std::thread> threads_;
};

// The PS of this process, by number.
std::mutex registry_mu;
std::map<int, std::weak_ptr<Core>>& Registry() {
  static auto* registry = new std::map<int, std::weak_ptr<Core>>;
  return *registry;
}
int next_number = 1;

std::shared_ptr<Core> Find(const std::string& address) {
  int n = 0;
  if (address.rfind(kScheme, 0) != 0 || !absl::SimpleAtoi(address.substr(sizeof(kScheme) - 1), &n)) return nullptr;
  std::lock_guard lock(registry_mu);
  auto it = Registry().find(n);
  return it == Registry().end() ? nullptr : it->second.lock();
}

class LoopbackServer final : public Server {
 public:
  explicit LoopbackServer(const ServerOptions& options) : options_(options) {}
  ~LoopbackServer() override {
    Shutdown();
    Wait();
  }

  absl::StatusOr<int> Start() override {
    if (options_.threads < 1) return absl::InvalidArgumentError("--threads must be >= 1");
    int n;
    {
      std::lock_guard lock(registry_mu);
      n = next_number++;
      core_ = std::make_shared<Core>(options_, n);
      Registry()[n] = core_;
    }
    core_->StartThreads();
    return n;
  }

  void Wait() override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return shutdown_ || !core_; });
    if (!core_ || stopped_) return;
    stopped_ = true;
    lock.unlock();
    {
      std::lock_guard registry_lock(registry_mu);
      for (auto it = Registry().begin(); it != Registry().end(); ++it) {
        if (it->second.lock() == core_) {
          Registry().erase(it);
          break;
        }
      }
    }
    core_->Stop();
  }

  void Shutdown() override {
    std::lock_guard lock(mu_);
    shutdown_ = true;
    cv_.notify_all();
  }

 private:
  const ServerOptions options_;
  std::shared_ptr<Core> core_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool shutdown_ = false, stopped_ = false;
};

// Worker side.
struct Peer {
  std::string address;
  std::weak_ptr<Core> core;
  uint64_t session = 0;
  uint64_t max_message_bytes = 0;  // its server's, as a session reply would say
};

class LoopbackClient final : public Client {
 public:
  explicit LoopbackClient(const ClientOptions& options) : options_(options) {
    for (const std::string& a : options.servers) peers_.push_back({a, {}, 0});
  }
  ~LoopbackClient() override {
    for (Peer& p : peers_) {
      if (auto core = p.core.lock(); core && p.session != 0) core->Leave(p.session, /*goodbye=*/true);
    }
  }

  absl::Status Connect() override {
    const absl::Time deadline = absl::Now() + options_.connect_timeout;
    for (Peer& p : peers_) {
      std::shared_ptr<Core> core;
      while (!(core = Find(p.address)) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
      if (!core) {
        return absl::UnavailableError(absl::StrCat("cannot reach PS ", p.address, " within ",
                                                   absl::FormatDuration(options_.connect_timeout),
                                                   " (is its server started in this process?)"));
      }
      if (absl::Status s = core->Admit(&p.session); !s.ok()) return s;
      p.core = core;
      p.max_message_bytes = core->options().max_message_bytes;
    }
    return absl::OkStatus();
  }

  size_t num_servers() const override { return peers_.size(); }
  const std::string& server_address(size_t i) const override { return peers_[i].address; }

  absl::StatusOr<int> Register(const Payload& payload) override {
    payloads_.push_back(&payload);
    return static_cast<int>(payloads_.size() - 1);
  }
  void Unregister(int payload) override {
    if (payload >= 0 && static_cast<size_t>(payload) < payloads_.size()) payloads_[payload] = nullptr;
  }

  void Start(Op op, size_t server, int payload, uint64_t tag) override;
  void StartExchange(size_t server, int request, int reply, uint64_t tag) override;
  absl::StatusOr<Completion> Next(absl::Time deadline) override;

  ClientCounts Counts() const override { return {"loopback", moved_.Read(), {}, ProcessGrpcPayloadCalls()}; }
  absl::StatusOr<ServerInfo> GetInfo(size_t server) override {
    auto core = server < peers_.size() ? peers_[server].core.lock() : nullptr;
    if (!core) return absl::UnavailableError(absl::StrCat("PS ", server_address(server), ": not serving"));
    return core->Info();
  }
  uint64_t max_message_bytes(size_t server) const override {
    return server < peers_.size() ? peers_[server].max_message_bytes : 0;
  }
  absl::Status Barrier(const std::string& name, int parties, int worker_index, absl::Time deadline) override {
    auto core = peers_.empty() ? nullptr : peers_[0].core.lock();
    if (!core) return absl::UnavailableError("the first PS is not serving");
    return core->Barrier(name, parties, worker_index, deadline);
  }

 private:
  const Payload* Lookup(int payload) const {
    return payload >= 0 && static_cast<size_t>(payload) < payloads_.size() ? payloads_[payload] : nullptr;
  }
  // Hands `task` to PS `server`'s threads; when it cannot, the op fails at once.
  void Post(size_t server, uint64_t tag, std::function<void(Core&, bool)> task) {
    auto core = peers_[server].core.lock();
    auto posted = core && core->Post([core, task = std::move(task)](bool serving) { task(*core, serving); });
    if (!posted) {
      completions_->Push(Done::Of(tag, absl::UnavailableError(absl::StrCat("PS ", peers_[server].address, ": not serving"))));
    }
  }

  const ClientOptions options_;
  std::vector<Peer> peers_;
  std::vector<const Payload*> payloads_;
  std::shared_ptr<Completions> completions_ = std::make_shared<Completions>();
  DataTally moved_{DataTally::kOneWriter};  // the driving thread's
};

void LoopbackClient::Start(Op op, size_t server, int payload, uint64_t tag) {
  const Payload* p = Lookup(payload);
  if (op == Op::kExchange || p == nullptr || server >= peers_.size()) {
    completions_->Push(Done::Of(tag, op == Op::kExchange ? ExchangeNeedsStartExchange()
                                                      : absl::InvalidArgumentError("no such PS or payload")));
    return;
  }
  // What goes over the wire: a copy of every buffer, made now (the payload may change after).
  auto data = std::make_shared<std::vector<std::vector<std::byte>>>();
  for (size_t i = 0; i < p->num_buffers(); ++i) {
    auto b = p->buffer(i);
    data->emplace_back(b.begin(), b.end());
  }
  moved_.Sent(p->total_bytes(), p->total_bytes());
  const bool validate = options_.validate;
  Post(server, tag, [op, p, tag, data, validate, done = completions_](Core& core, bool serving) {
    Done d = Done::Of(tag);
    if (!serving) {
      d.status = Prefixed(core.address(), absl::UnavailableError("the PS stopped"));
      done->Push(std::move(d));
      return;
    }
    uint64_t bytes = 0;
    for (const auto& b : *data) bytes += b.size();
    if (bytes > core.options().max_message_bytes) {
      d.status = Prefixed(core.address(), absl::ResourceExhaustedError(absl::StrCat(
                                              "a request of ", bytes, " bytes is over the PS's --max-message-size=",
                                              FormatSize(core.options().max_message_bytes))));
      done->Push(std::move(d));
      return;
    }
    core.Count(bytes);
    const bool corrupt = core.ShouldCorrupt() && bytes > 0;
    auto damage = [&data] {
      for (auto& b : *data) {
        if (!b.empty()) {
          b[b.size() / 2] ^= std::byte{0x5a};
          return;
        }
      }
    };
    // Pushes are damaged before the PS checks them, echoes after (the worker's check).
    if (corrupt && op == Op::kPush) damage();
    if (validate) {
      for (size_t i = 0; i < data->size(); ++i) {
        if (Checksum((*data)[i]) != p->checksums()[i]) {
          d.status = Prefixed(core.address(), absl::DataLossError(absl::StrCat("checksum of buffer ", i, " differs")));
          done->Push(std::move(d));
          return;
        }
      }
    }
    if (corrupt && op == Op::kEcho) damage();
    if (op == Op::kEcho) {
      core.moved()->Sent(bytes, bytes);
      d.echo_of = p;
      d.echoed = std::move(*data);
      d.address = core.address();
    }
    done->Push(std::move(d));
  });
}

void LoopbackClient::StartExchange(size_t server, int request, int reply, uint64_t tag) {
  const Payload* req = Lookup(request);
  const Payload* rep = Lookup(reply);
  if (absl::Status s = CheckExchange(server, peers_.size(), req, rep); !s.ok()) {
    completions_->Push(Done::Of(tag, std::move(s)));
    return;
  }
  auto core = peers_[server].core.lock();
  if (!core) {
    completions_->Push(Done::Of(tag, absl::UnavailableError(absl::StrCat("PS ", peers_[server].address,
                                                                                  ": not serving"))));
    return;
  }
  // The request as the PS receives it: in pooled memory, the reply laid out over it.
  auto buffers = std::make_shared<ExchangeBuffers>();
  buffers->sizes = req->sizes();
  std::vector<uint64_t> offsets;
  auto block = core->pool().Take(LayOutBuffers(buffers->sizes, &offsets));
  if (!block.ok()) {
    completions_->Push(Done::Of(tag, Prefixed(peers_[server].address, block.status())));
    return;
  }
  buffers->block = *block;
  for (size_t i = 0; i < buffers->sizes.size(); ++i) {
    auto b = req->buffer(i);
    if (!b.empty()) std::memcpy(buffers->block->data() + offsets[i], b.data(), b.size());
    buffers->request.emplace_back(buffers->block->data() + offsets[i], b.size());
  }
  buffers->PlaceReply(offsets);
  buffers->validate = options_.validate;
  moved_.Sent(req->total_bytes(), req->total_bytes());
  std::vector<uint64_t> sent;
  if (options_.validate) req->ComputeChecksums(&sent);
  Post(server, tag, [buffers, sent = std::move(sent), tag, req, rep, done = completions_](Core& core, bool serving) {
    auto fail = [&](const absl::Status& s) { done->Push(Done::Of(tag, Prefixed(core.address(), s))); };
    if (!serving) return fail(ExchangeCancelledError());
    uint64_t bytes = 0;
    for (uint64_t s : buffers->sizes) bytes += s;
    core.Count(bytes);
    if (core.ShouldCorrupt() && bytes > 0) {
      for (auto& b : buffers->reply) {  // the same memory as the request
        if (!b.empty()) {
          b[b.size() / 2] ^= std::byte{0x5a};
          break;
        }
      }
    }
    if (buffers->validate) {
      if (absl::Status s = VerifyRequest(*buffers, sent); !s.ok()) return fail(s);
    }
    if (core.hub().handler() == nullptr) return fail(NoExchangeHandlerError());
    const std::string address = core.address();
    bool ran = core.hub().Run(buffers, [buffers, tag, req, rep, done, address, bytes,
                                        moved = core.moved()](const absl::Status& s, bool answered) {
      if (answered && s.ok()) {
        moved->Sent(bytes, bytes);
        Done d = Done::Of(tag);
        d.exchange = buffers;
        d.reply_to = rep;
        d.request = req;
        d.address = address;
        done->Push(std::move(d));
      } else {
        done->Push(Done::Of(tag, Prefixed(address, s)));
      }
    });
    if (!ran) fail(ExchangeCancelledError());
  });
}

absl::StatusOr<Completion> LoopbackClient::Next(absl::Time deadline) {
  std::optional<Done> d = completions_->Pop(deadline);
  if (!d) return absl::DeadlineExceededError("no operation finished in time");
  Completion c{.tag = d->tag, .status = d->status};
  if (!c.status.ok()) return c;
  moved_.Completed();
  if (d->echo_of != nullptr || d->exchange) {
    const uint64_t bytes = d->echo_of != nullptr ? d->echo_of->total_bytes() : d->request->total_bytes();
    moved_.Received(bytes, bytes);
  }
  if (d->echo_of != nullptr && options_.validate) {
    for (size_t i = 0; i < d->echoed.size(); ++i) {
      if (Checksum(d->echoed[i]) != d->echo_of->checksums()[i]) {
        c.status = Prefixed(d->address, absl::DataLossError(absl::StrCat("echoed buffer ", i, " differs from the one sent")));
        break;
      }
    }
  }
  if (d->exchange) {
    const ExchangeBuffers& x = *d->exchange;
    std::vector<uint64_t> reply_sizes;
    for (const auto& b : x.reply) reply_sizes.push_back(b.size());
    if (absl::Status s = CheckReplySizes(reply_sizes, d->request->sizes()); !s.ok()) {
      c.status = Prefixed(d->address, s);
      return c;
    }
    auto into = ReplyBuffers(*d->reply_to);
    for (size_t i = 0; i < into.size(); ++i) {
      if (!into[i].empty()) std::memcpy(into[i].data(), x.reply[i].data(), into[i].size());
      if (options_.validate && Checksum(into[i]) != x.reply_checksums.at(i)) {
        c.status = Prefixed(d->address, absl::DataLossError(absl::StrCat("reply buffer ", i, " differs from the one the PS sent")));
      }
    }
  }
  return c;
}

}  // namespace

std::unique_ptr<Server> NewLoopbackServer(const ServerOptions& options) {
  return std::make_unique<LoopbackServer>(options);
}

std::unique_ptr<Client> NewLoopbackClient(const ClientOptions& options) {
  return std::make_unique<LoopbackClient>(options);
}

}  // namespace psbench::loopback
