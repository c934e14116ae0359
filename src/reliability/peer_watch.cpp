#include "reliability/peer_watch.h"

namespace tpbatch {

PeerWatch::PeerWatch(int ranks, int self, double now)
    : last_round_(now), last_(static_cast<size_t>(ranks), now), forgotten_(static_cast<size_t>(ranks), false) {
  forgotten_[static_cast<size_t>(self)] = true;  // a rank does not watch itself
}

bool PeerWatch::start_round(double now, double max_gap) {
  const bool absent = now - last_round_ > max_gap;
  last_round_ = now;
  if (absent) restart(now);
  return absent;
}

void PeerWatch::restart(double now) {
  for (double& t : last_)
    if (t < now) t = now;
}

void PeerWatch::beat(int rank, double now) {
  double& t = last_[static_cast<size_t>(rank)];
  if (now > t) t = now;
}

void PeerWatch::forget(int rank) { forgotten_[static_cast<size_t>(rank)] = true; }

std::vector<int> PeerWatch::silent(double now, double timeout) const {
  std::vector<int> out;
  if (timeout <= 0) return out;
  for (size_t r = 0; r < last_.size(); ++r)
    if (!forgotten_[r] && now - last_[r] > timeout) out.push_back(static_cast<int>(r));
  return out;
}

}  // namespace tpbatch
