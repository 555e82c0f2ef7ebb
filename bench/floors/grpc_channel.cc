#include "grpc_channel.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <climits>
#include <thread>

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

FloorServer StartFloorServer(int32_t port, const std::function<void(grpc::ServerBuilder&)>& add_service,
                             bool with_queue) {
  FloorServer s;
  sigemptyset(&s.stop);
  sigaddset(&s.stop, SIGTERM);
  sigaddset(&s.stop, SIGINT);
  sigaddset(&s.stop, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &s.stop, nullptr);

  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(fmt::format("127.0.0.1:{}", port), grpc::InsecureServerCredentials(), &selected_port);
  builder.SetMaxReceiveMessageSize(INT_MAX);
  builder.SetMaxSendMessageSize(INT_MAX);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a busy port must fail, not be shared
  add_service(builder);
  if (with_queue) s.cq = builder.AddCompletionQueue();
  s.server = builder.BuildAndStart();
  if (!s.server || selected_port == 0) fatal(fmt::format("cannot listen on 127.0.0.1:{}", port));
  announce_listening(selected_port);
  return s;
}

int ServeOnOneQueue(int32_t port, const std::function<void(grpc::ServerBuilder&)>& add_service,
                    const std::function<void(grpc::ServerCompletionQueue*)>& post,
                    const std::function<void(void*, bool)>& proceed) {
  // A thread of its own takes the stop signal and stops the server; the calling thread
  // drives the queue.
  FloorServer s = StartFloorServer(port, add_service, /*with_queue=*/true);
  std::unique_ptr<grpc::Server>& server = s.server;
  std::unique_ptr<grpc::ServerCompletionQueue>& cq = s.cq;
  post(cq.get());  // before the queue can be shut down
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&s.stop, &sig);
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    cq->Shutdown();
  });
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) proceed(tag, ok);
  stopper.join();
  server->Wait();
  return 0;
}

}  // namespace psbench::floors
