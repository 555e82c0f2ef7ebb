#include "ps/ps_client.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psbench {
namespace {

uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// Registers an exchange's request and reply with the transport, for the run.
absl::Status RegisterExchange(Client& client, const Payload& request, const Payload& reply, int* request_id,
                              int* reply_id) {
  auto req = client.Register(request);
  if (!req.ok()) return req.status();
  *request_id = *req;
  auto rep = client.Register(reply);
  if (!rep.ok()) return rep.status();
  *reply_id = *rep;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(Client& client,
                                                           const std::vector<uint64_t>& tensor_bytes,
                                                           Options options) {
  std::unique_ptr<PsClient> ps(new PsClient(client, std::move(options)));
  const Options& o = ps->options_;
  ps->header_.worker = o.worker;
  ps->header_.num_workers = o.num_workers;
  ps->header_.flags = o.sync ? uint32_t{ExchangeHeader::kSync} : 0u;
  ps->header_.learning_rate = o.learning_rate;
  ps->header_.momentum = o.momentum;
  ps->header_.run_id = Fnv1a(o.run_id);

  // Placement: each tensor on the PS with the fewest bytes so far, in model order.
  const size_t num_ps = client.num_servers();
  for (size_t t = 0; t < tensor_bytes.size(); ++t) {
    if (tensor_bytes[t] % sizeof(float) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t, ": ", tensor_bytes[t],
                                                     " bytes are not float32 data"));
    }
  }
  ps->shards_.resize(num_ps);
  ps->data_plane_.resize(num_ps);
  std::vector<Shard> placed = PlaceByBytes(tensor_bytes, num_ps);
  for (size_t p = 0; p < num_ps; ++p) ps->shards_[p].placed = std::move(placed[p]);

  ps->bytes_ = tensor_bytes;
  ps->outgoing_.resize(tensor_bytes.size());
  ps->incoming_.resize(tensor_bytes.size());
  if (!o.buckets.empty()) {
    if (absl::Status s = ps->MakeParts(tensor_bytes); !s.ok()) return s;
    return ps;
  }
  // Each PS's request and reply: [header, its tensors...], registered once for the run.
  for (ShardPayloads& shard : ps->shards_) {
    std::vector<uint64_t> sizes = {sizeof(ExchangeHeader)};
    for (size_t t : shard.placed.tensors) sizes.push_back(tensor_bytes[t]);
    shard.request_memory = std::make_unique<Payload>(sizes, o.seed);
    shard.reply_memory = std::make_unique<Payload>(sizes, o.seed);
    shard.request = shard.request_memory.get();
    shard.reply = shard.reply_memory.get();
    for (size_t k = 0; k < shard.placed.tensors.size(); ++k) {
      const size_t t = shard.placed.tensors[k];
      ps->outgoing_[t] = reinterpret_cast<float*>(shard.request_memory->mutable_buffer(k + 1).data());
      ps->incoming_[t] = reinterpret_cast<float*>(shard.reply_memory->mutable_buffer(k + 1).data());
    }
    if (absl::Status s = RegisterExchange(client, *shard.request, *shard.reply, &shard.request_id, &shard.reply_id);
        !s.ok()) {
      return s;
    }
  }
  return ps;
}

absl::Status PsClient::MakeParts(const std::vector<uint64_t>& tensor_bytes) {
  // Every tensor in one bucket.
  std::vector<int> bucket_of(tensor_bytes.size(), -1);
  for (size_t b = 0; b < options_.buckets.size(); ++b) {
    for (size_t t : options_.buckets[b]) {
      if (t >= tensor_bytes.size() || bucket_of[t] >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "bucket ", b, " lists tensor ", t, t >= tensor_bytes.size() ? absl::StrCat(" of ", tensor_bytes.size())
                                                                       : " again"));
      }
      bucket_of[t] = static_cast<int>(b);
    }
  }
  for (size_t t = 0; t < tensor_bytes.size(); ++t) {
    if (bucket_of[t] < 0) return absl::InvalidArgumentError(absl::StrCat("tensor ", t, " is in no bucket"));
  }
  // A part: one bucket's tensors on one PS, in model order (as the PS's shard has them).
  std::vector<size_t> ps_of(tensor_bytes.size()), position(tensor_bytes.size());
  for (size_t p = 0; p < shards_.size(); ++p) {
    for (size_t k = 0; k < shards_[p].placed.tensors.size(); ++k) {
      ps_of[shards_[p].placed.tensors[k]] = p;
      position[shards_[p].placed.tensors[k]] = k;
    }
  }
  for (size_t b = 0; b < options_.buckets.size(); ++b) {
    std::vector<size_t> sorted = options_.buckets[b];
    std::sort(sorted.begin(), sorted.end());
    for (size_t p = 0; p < shards_.size(); ++p) {
      PartPayloads part;
      part.part.ps = p;
      part.part.bucket = b;
      for (size_t t : sorted) {
        if (ps_of[t] != p) continue;
        part.part.tensors.push_back(t);
        part.part.bytes += tensor_bytes[t];
      }
      if (!part.part.tensors.empty()) parts_.push_back(std::move(part));
    }
  }
  // Each PS's memory: [header, its tensors...], then a header and an index list per part.
  std::vector<std::vector<size_t>> parts_on(shards_.size());
  for (size_t i = 0; i < parts_.size(); ++i) parts_on[parts_[i].part.ps].push_back(i);
  for (size_t p = 0; p < shards_.size(); ++p) {
    ShardPayloads& shard = shards_[p];
    const size_t n = shard.placed.tensors.size();
    std::vector<uint64_t> sizes = {sizeof(ExchangeHeader)};
    for (size_t t : shard.placed.tensors) sizes.push_back(tensor_bytes[t]);
    for (size_t i : parts_on[p]) {
      sizes.push_back(sizeof(ExchangeHeader));
      sizes.push_back(parts_[i].part.tensors.size() * sizeof(uint32_t));
    }
    shard.request_memory = std::make_unique<Payload>(sizes, options_.seed);
    shard.reply_memory = std::make_unique<Payload>(sizes, options_.seed);
    for (size_t k = 0; k < n; ++k) {
      const size_t t = shard.placed.tensors[k];
      outgoing_[t] = reinterpret_cast<float*>(shard.request_memory->mutable_buffer(k + 1).data());
      incoming_[t] = reinterpret_cast<float*>(shard.reply_memory->mutable_buffer(k + 1).data());
    }
    std::vector<size_t> whole(n + 1);
    for (size_t k = 0; k <= n; ++k) whole[k] = k;
    shard.request_view = Payload::View(*shard.request_memory, whole);
    shard.reply_view = Payload::View(*shard.reply_memory, whole);
    shard.request = shard.request_view.get();
    shard.reply = shard.reply_view.get();
    if (absl::Status s = RegisterExchange(client_, *shard.request, *shard.reply, &shard.request_id, &shard.reply_id);
        !s.ok()) {
      return s;
    }
    size_t next = n + 1;  // the first part's header buffer
    for (size_t i : parts_on[p]) {
      PartPayloads& part = parts_[i];
      std::vector<size_t> buffers = {next, next + 1};
      auto list = shard.request_memory->mutable_buffer(next + 1);
      for (size_t j = 0; j < part.part.tensors.size(); ++j) {
        const uint32_t k = static_cast<uint32_t>(position[part.part.tensors[j]]);
        std::memcpy(list.data() + j * sizeof(uint32_t), &k, sizeof(k));
        buffers.push_back(k + 1);
      }
      part.header = shard.request_memory->mutable_buffer(next).data();
      part.request = Payload::View(*shard.request_memory, buffers);
      part.reply = Payload::View(*shard.reply_memory, buffers);
      next += 2;
      if (absl::Status s = RegisterExchange(client_, *part.request, *part.reply, &part.request_id, &part.reply_id);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

PsClient::~PsClient() {
  for (PartPayloads& part : parts_) {
    if (part.request_id >= 0) client_.Unregister(part.request_id);
    if (part.reply_id >= 0) client_.Unregister(part.reply_id);
  }
  for (ShardPayloads& shard : shards_) {
    if (shard.request_id >= 0) client_.Unregister(shard.request_id);
    if (shard.reply_id >= 0) client_.Unregister(shard.reply_id);
  }
}

absl::Status PsClient::Exchange(ExchangeHeader::Kind kind, uint64_t step, const std::vector<size_t>& ps) {
  std::vector<size_t> which = ps;
  if (which.empty()) {
    for (size_t p = 0; p < shards_.size(); ++p) which.push_back(p);
  }
  header_.kind = kind;
  header_.step = step;
  for (size_t p : which) {
    ShardPayloads& shard = shards_[p];
    header_.num_tensors = static_cast<uint32_t>(shard.placed.tensors.size());
    std::memcpy(shard.request_memory->mutable_buffer(0).data(), &header_, sizeof(header_));
    client_.StartExchange(p, shard.request_id, shard.reply_id, p);
  }
  const std::string what = kind == ExchangeHeader::kInit ? std::string("reading parameters")
                                                         : absl::StrCat("step ", step);
  // Every started exchange is reaped, even after a failure: its payloads stay in use until then.
  absl::Status failure;
  const absl::Time deadline = absl::Now() + options_.round_timeout;
  for (size_t done = 0; done < which.size(); ++done) {
    auto c = client_.Next(deadline);
    if (!c.ok()) return absl::Status(c.status().code(), absl::StrCat(what, ": ", c.status().message()));
    if (c->tag >= shards_.size()) {
      return absl::InternalError(absl::StrCat(what, ": a part's completion in a whole round (wait for parts first)"));
    }
    if (!c->status.ok() && failure.ok()) failure = Named(what, c->tag, c->status);
    if (c->status.ok()) Exchanged(*shards_[c->tag].request, *shards_[c->tag].reply);
  }
  return failure;
}

void PsClient::StartPart(size_t i, uint64_t step) {
  PartPayloads& part = parts_[i];
  ExchangeHeader h = header_;
  h.kind = ExchangeHeader::kStep;
  h.step = step;
  h.flags |= ExchangeHeader::kSubset;
  h.num_tensors = static_cast<uint32_t>(part.part.tensors.size());
  std::memcpy(part.header, &h, sizeof(h));
  part.step = step;
  // Tags above the PS indices of whole rounds: part i is tag shards_.size() + i.
  client_.StartExchange(part.part.ps, part.request_id, part.reply_id, shards_.size() + i);
}

absl::StatusOr<std::optional<size_t>> PsClient::NextPart(absl::Time deadline) {
  auto c = client_.Next(deadline);
  if (absl::IsDeadlineExceeded(c.status())) return std::nullopt;
  if (!c.ok()) return c.status();
  if (c->tag < shards_.size() || c->tag - shards_.size() >= parts_.size()) {
    return absl::InternalError(absl::StrCat("a completion of tag ", c->tag, " that is no started part"));
  }
  const size_t i = c->tag - shards_.size();
  if (!c->status.ok()) {
    return Named(absl::StrCat("step ", parts_[i].step, " (bucket ", parts_[i].part.bucket, ")"),
                 parts_[i].part.ps, c->status);
  }
  Exchanged(*parts_[i].request, *parts_[i].reply);
  return std::optional<size_t>(i);
}

absl::Status PsClient::Named(const std::string& what, size_t ps, const absl::Status& status) const {
  // Named once: a transport's own error usually begins with the PS already.
  const std::string name = absl::StrCat("PS ", client_.server_address(ps));
  const absl::string_view message = status.message();
  return absl::Status(status.code(), absl::StartsWith(message, name + ":")
                                         ? absl::StrCat(what, " on ", message)
                                         : absl::StrCat(what, " on ", name, ": ", message));
}

ExchangeHeader PsClient::ReplyHeader(size_t ps) const {
  ExchangeHeader got;
  std::memcpy(&got, shards_[ps].reply_memory->buffer(0).data(), sizeof(got));
  return got;
}

absl::StatusOr<UpdateReport> PsClient::Report(size_t ps) {
  auto info = client_.GetInfo(ps);
  if (!info.ok()) return info.status();
  data_plane_[ps] = info->data_plane;
  const std::string& address = client_.server_address(ps);
  if (info->updates.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PS ", address, " reports no exchange run (a psbench-ps without the parameter store?)"));
  }
  auto json = nlohmann::json::parse(info->updates, nullptr, /*allow_exceptions=*/false);
  auto report = json.is_discarded() ? absl::StatusOr<UpdateReport>(absl::InvalidArgumentError("not JSON"))
                                    : UpdateReport::FromJson(json);
  if (!report.ok()) {
    return absl::Status(report.status().code(), absl::StrCat("PS ", address, ": ", report.status().message()));
  }
  if (report->run_id != header_.run_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PS ", address, " is serving another run now (a run with another --run-id started on it)"));
  }
  return report;
}

absl::StatusOr<std::vector<UpdateReport>> PsClient::ReadBack(const std::function<void()>& fill_initial,
                                                             int* reads) {
  std::vector<UpdateReport> reports(shards_.size());
  *reads = 0;
  if (options_.sync) {
    for (size_t p = 0; p < shards_.size(); ++p) {
      auto r = Report(p);
      if (!r.ok()) return r.status();
      reports[p] = *std::move(r);
    }
    return reports;
  }
  // A read is consistent with a report when the PS's update count did not move in between.
  std::vector<size_t> pending;
  for (size_t p = 0; p < shards_.size(); ++p) pending.push_back(p);
  const absl::Time deadline = absl::Now() + options_.round_timeout;
  while (!pending.empty()) {
    fill_initial();
    if (absl::Status s = Exchange(ExchangeHeader::kInit, 0, pending); !s.ok()) return s;
    ++*reads;
    std::vector<size_t> again;
    for (size_t p : pending) {
      auto r = Report(p);
      if (!r.ok()) return r.status();
      reports[p] = *std::move(r);
      if (reports[p].updates != ReplyHeader(p).updates_applied) again.push_back(p);
    }
    pending = std::move(again);
    if (pending.empty()) break;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("PS ", client_.server_address(pending[0]),
                                                      " kept applying updates: no consistent read within ",
                                                      absl::FormatDuration(options_.round_timeout)));
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  return reports;
}

nlohmann::json PsClient::PlacementJson() const {
  nlohmann::json placement = nlohmann::json::array();
  for (size_t p = 0; p < shards_.size(); ++p) {
    placement.push_back({{"ps", client_.server_address(p)},
                         {"tensors", shards_[p].placed.tensors.size()},
                         {"bytes", shards_[p].placed.bytes}});
  }
  return placement;
}

}  // namespace psbench
