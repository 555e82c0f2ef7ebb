// Tells ThreadSanitizer about the happens-before that a gRPC completion queue provides.
// Debian's gRPC is not built with -fsanitize=thread, so TSan cannot see that an operation
// started on one thread (an exchange answered from the handler's thread) happens before its
// tag comes out of the queue on a serving thread; without this it reports the serving
// thread's use and deletion of the call as races. Outside TSan builds these do nothing.
#ifndef PSBENCH_TRANSPORTS_CONTROL_TSAN_HANDOFF_H_
#define PSBENCH_TRANSPORTS_CONTROL_TSAN_HANDOFF_H_

#if defined(__SANITIZE_THREAD__)
#define PSBENCH_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PSBENCH_TSAN 1
#endif
#endif

#ifdef PSBENCH_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace psbench::control {

// Runs `start`, which starts an operation tagged `tag` on a completion queue, from a thread
// other than the serving thread that will take the tag. What this thread wrote before is
// released to the tag; grpc++'s own bookkeeping inside `start` (inline code from
// libgrpc++-dev filling in its call objects, ordered by libgrpc) is not recorded.
template <typename Start>
void StartFromAnotherThread(void* tag, Start&& start) {
#ifdef PSBENCH_TSAN
  __tsan_release(tag);
  __tsan_ignore_thread_begin();
  start();
  __tsan_ignore_thread_end();
#else
  start();
#endif
}

// As a tag comes out of the queue, before the call it names is touched.
inline void TagTakenFromQueue(void* tag) {
#ifdef PSBENCH_TSAN
  __tsan_acquire(tag);
#else
  (void)tag;
#endif
}

}  // namespace psbench::control

#endif  // PSBENCH_TRANSPORTS_CONTROL_TSAN_HANDOFF_H_
