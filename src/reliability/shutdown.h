#pragma once
// How a rank stops. SIGTERM/SIGINT/SIGHUP (what Slurm sends at a time limit or preemption, what
// mpirun forwards, a closed terminal) request a graceful stop: replicas take no new rows, finished
// rows are committed, the file stays resumable. SIGSEGV/SIGABRT/SIGBUS/SIGFPE print which rank died
// before the default action kills it (mpirun or srun then ends every other rank).
#include <string>

namespace tpbatch {

void install_signal_handlers(int world_rank);
// For commands that read a file a library may crash on (a damaged results file inside libhdf5):
// SIGSEGV/SIGABRT/SIGBUS/SIGFPE print "tpbatch: fatal signal N (NAME) while <doing>" first.
void name_fatal_signals_while(const std::string& doing);
bool stop_requested();
void request_stop();   // for tests

}  // namespace tpbatch
