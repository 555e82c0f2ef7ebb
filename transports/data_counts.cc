#include "transports/data_counts.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace psbench {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<const DataTally*> live;
  DataCounts gone;  // what destroyed tallies counted
};

Registry& TheRegistry() {
  static Registry* registry = new Registry;  // never destroyed: clients may outlive statics
  return *registry;
}

}  // namespace

GrpcCallTally::GrpcCallTally() : DataTally(kOneWriter) {
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mu);
  r.live.push_back(this);
}

GrpcCallTally::~GrpcCallTally() {
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mu);
  r.live.erase(std::find(r.live.begin(), r.live.end(), this));
  r.gone = r.gone + Read();
}

DataCounts ProcessGrpcPayloadCalls() {
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mu);
  DataCounts sum = r.gone;
  for (const DataTally* t : r.live) sum = sum + t->Read();
  return sum;
}

}  // namespace psbench
