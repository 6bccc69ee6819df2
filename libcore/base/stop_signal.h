#pragma once

namespace mds::base {

// SIGINT, SIGTERM and SIGUSR1 (SLURM's preemption warning) set a process-wide flag instead of
// killing the process, so long-running loops can stop cleanly: finish or discard their outputs
// and exit. POSIX signals are process-wide, which is why this one piece of state is global.
void install_stop_signal_handlers();

// The signal number received, or 0 if none.
int stop_signal_received();

// Throws base::Error("interrupted by <signal>") if a stop signal arrived.
void throw_if_stop_requested();

}  // namespace mds::base
