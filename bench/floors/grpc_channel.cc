#include "grpc_channel.h"

#include <chrono>

#include "floor_common.h"
#include "fmt/core.h"

namespace psbench::floors {

std::shared_ptr<grpc::Channel> ConnectedChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(5);
  for (auto state = channel->GetState(true); state != GRPC_CHANNEL_READY; state = channel->GetState(true)) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) usage_error(fmt::format("cannot connect to {}", target));
    if (!channel->WaitForStateChange(state, deadline)) usage_error(fmt::format("cannot connect to {}: timed out", target));
  }
  return channel;
}

}  // namespace psbench::floors
