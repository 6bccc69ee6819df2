#include "base/stop_signal.h"

#include <atomic>
#include <csignal>
#include <cstring>

#include "base/error.h"

namespace mds::base {
namespace {

std::atomic<int> received_signal{0};

extern "C" void record_stop_signal(int signal_number) {
  received_signal.store(signal_number);
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = record_stop_signal;
  sigemptyset(&action.sa_mask);
  for (const int signal_number : {SIGINT, SIGTERM, SIGUSR1}) {
    sigaction(signal_number, &action, nullptr);
  }
}

int stop_signal_received() {
  return received_signal.load();
}

void throw_if_stop_requested() {
  const int signal_number = received_signal.load();
  if (signal_number != 0) fail("interrupted by ", strsignal(signal_number));
}

}  // namespace mds::base
