#include "engine/step_pipe.h"

#include <cstring>

#include "common/error.h"

namespace tpbatch {
namespace {

constexpr int kStageTag = 201, kOutputTag = 202;  // on the pipeline's communicator
enum Command : char { kStop = 0, kStep = 1 };

// [command][the serialized step, after kStep]
std::string step_message(const StepInputs* step) {
  if (!step) return std::string(1, kStop);
  return std::string(1, kStep) + step->serialize();
}

// false for the stop
bool read_step_message(const std::string& m, StepInputs& step) {
  if (m.empty()) throw Error("internal error: empty step message");
  if (m[0] == kStop) return false;
  step = StepInputs::deserialize(m.substr(1));
  return true;
}

template <class T>
void append(std::string& m, const std::vector<T>& v) {
  m.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <class T>
const char* take(const char* at, std::vector<T>& v, int64_t n) {
  v.resize(static_cast<size_t>(n));
  std::memcpy(v.data(), at, v.size() * sizeof(T));
  return at + v.size() * sizeof(T);
}

}  // namespace

StepPipe::StepPipe(const Topology& topo, ModelRunner& runner, Communicator& pp_data)
    : topo_(topo), runner_(runner), data_(pp_data), tp_(topo.tp->comm()), pp_(topo.pp->comm()) {}

void StepPipe::launch(const StepInputs& step) {
  if (topo_.layout.tensor > 1) {
    std::string m = step_message(&step);
    tp_.broadcast(m, 0, "broadcast of the step to the tensor-parallel group");
  }
  run(step);
}

void StepPipe::stop() {
  if (topo_.layout.tensor > 1) {
    std::string m = step_message(nullptr);
    tp_.broadcast(m, 0, "broadcast of the stop to the tensor-parallel group");
  }
  if (!last_stage()) send_next(nullptr);
}

bool StepPipe::receive(StepInputs& step) {
  bool go;
  if (topo_.coords.pp == 0) {
    std::string m;
    tp_.broadcast(m, 0, "broadcast of the step to the tensor-parallel group");
    go = read_step_message(m, step);
  } else {
    const int prev = topo_.coords.pp - 1;
    go = read_step_message(pp_.recv(prev, kStageTag, "pipeline receive from the previous stage").bytes, step);
    if (go && step.rows() > 0)
      data_.recv(runner_.hidden_input(step.rows()), runner_.hidden_bytes(step.rows()), prev);
  }
  if (!go && !last_stage()) send_next(nullptr);
  return go;
}

void StepPipe::run(const StepInputs& step) {
  runner_.run_stage(step);
  if (!last_stage()) {
    send_next(&step);
    return;
  }
  runner_.compute_logits(step, output_.results, output_.full_logits);
  if (topo_.coords.tp != 0) return;  // the hidden state is replicated: one rank's output suffices
  runner_.compute_embeddings(step, output_.embeds);
  if (is_leader())
    kept_.push_back(std::move(output_));
  else
    send_output(output_);
}

void StepPipe::collect(StepResults& out) {
  if (!kept_.empty()) {
    out = std::move(kept_.front());
    kept_.pop_front();
    return;
  }
  const ControlMessage m = pp_.recv(topo_.layout.pipeline - 1, kOutputTag, "pipeline receive of logits");
  int64_t header[3];
  if (m.bytes.size() < sizeof header) throw Error("internal error: short step output message");
  std::memcpy(header, m.bytes.data(), sizeof header);
  const char* at = m.bytes.data() + sizeof header;
  at = take(at, out.results, header[0]);
  at = take(at, out.full_logits, header[1]);
  take(at, out.embeds, header[2]);
}

void StepPipe::send_next(const StepInputs* step) {
  drain_bounded();
  pp_.send(step_message(step), topo_.coords.pp + 1, kStageTag);
  if (step && step->rows() > 0)
    data_.send(runner_.hidden(), runner_.hidden_bytes(step->rows()), topo_.coords.pp + 1);
}

void StepPipe::send_output(const StepResults& out) {
  drain_bounded();
  std::string m;
  const int64_t header[3] = {static_cast<int64_t>(out.results.size()), static_cast<int64_t>(out.full_logits.size()),
                             static_cast<int64_t>(out.embeds.size())};
  m.append(reinterpret_cast<const char*>(header), sizeof header);
  append(m, out.results);
  append(m, out.full_logits);
  append(m, out.embeds);
  pp_.send(std::move(m), 0, kOutputTag);
}

// A stage runs at most one step per stage ahead of its receiver (the leader keeps that many in
// flight), so this bound is never waited on in a healthy pipeline; it only caps the memory held.
void StepPipe::drain_bounded() { pp_.drain(2 * static_cast<size_t>(topo_.layout.pipeline), "pipeline send"); }

}  // namespace tpbatch
