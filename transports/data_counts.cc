#include "transports/data_counts.h"

namespace psbench {

DataTally& ProcessGrpcPayloadCalls() {
  static DataTally* tally = new DataTally(DataTally::kManyWriters);  // never destroyed
  return *tally;
}

}  // namespace psbench
