#include "engine/row_dispatcher.h"

#include <cstring>
#include <list>

#include "common/error.h"
#include "reliability/shutdown.h"

namespace tpbatch {
namespace {

double now_seconds() { return MPI_Wtime(); }

// WORK message: [u8 exhausted][u32 count] then per row [i64 index][u32 length][bytes].
std::string encode_work(const std::vector<WorkItem>& items, bool exhausted) {
  std::string m;
  m.push_back(exhausted ? 1 : 0);
  const uint32_t n = static_cast<uint32_t>(items.size());
  m.append(reinterpret_cast<const char*>(&n), 4);
  for (const auto& it : items) {
    const uint32_t len = static_cast<uint32_t>(it.line.size());
    m.append(reinterpret_cast<const char*>(&it.index), 8);
    m.append(reinterpret_cast<const char*>(&len), 4);
    m.append(it.line);
  }
  return m;
}

bool decode_work(const std::string& m, std::vector<WorkItem>& out) {
  size_t at = 0;
  auto need = [&](size_t n) {
    if (at + n > m.size()) throw Error("corrupt work message from rank 0");
  };
  need(5);
  const bool exhausted = m[0] != 0;
  uint32_t n;
  std::memcpy(&n, m.data() + 1, 4);
  at = 5;
  for (uint32_t i = 0; i < n; ++i) {
    WorkItem it;
    uint32_t len;
    need(12);
    std::memcpy(&it.index, m.data() + at, 8);
    std::memcpy(&len, m.data() + at + 8, 4);
    at += 12;
    need(len);
    it.line.assign(m.data() + at, len);
    at += len;
    out.push_back(std::move(it));
  }
  return exhausted;
}

std::string probe_recv(MPI_Comm comm, int source, int tag, MPI_Status* status_out = nullptr) {
  MPI_Status st;
  MPI_Probe(source, tag, comm, &st);
  int count = 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
  std::string buf(static_cast<size_t>(count), '\0');
  MPI_Recv(buf.data(), count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm, MPI_STATUS_IGNORE);
  if (status_out) *status_out = st;
  return buf;
}

class LocalWorkSource final : public WorkSource {
 public:
  explicit LocalWorkSource(RowDispatcher& d) : d_(d) {}
  bool take(std::vector<WorkItem>& out, size_t max_items, bool) override { return d_.read_rows(out, max_items); }
  void submit(const RowResult& r) override { d_.record(r); }
  void poll() override { d_.serve(false); }
  void close() override {}

 private:
  RowDispatcher& d_;
};

class RemoteWorkSource final : public WorkSource {
 public:
  explicit RemoteWorkSource(MPI_Comm control) : control_(control) {}
  ~RemoteWorkSource() override { drain(); }

  bool take(std::vector<WorkItem>& out, size_t max_items, bool wait) override {
    if (exhausted_) return false;
    if (!requested_ && max_items > 0) {  // prefetch: one request in flight at a time
      const int32_t n = static_cast<int32_t>(max_items);
      MPI_Send(&n, 1, MPI_INT32_T, 0, kTagRequest, control_);
      requested_ = true;
    }
    int ready = 0;
    if (!wait) MPI_Iprobe(0, kTagWork, control_, &ready, MPI_STATUS_IGNORE);
    if (wait || ready) {
      exhausted_ = decode_work(probe_recv(control_, 0, kTagWork), out);
      requested_ = false;
    }
    return !exhausted_;
  }

  void submit(const RowResult& r) override {
    pending_.emplace_back();
    Pending& p = pending_.back();
    p.bytes = serialize(r);
    MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, 0, kTagResult, control_, &p.request);
    poll();
  }

  void poll() override {  // forget sends that completed
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      it = done ? pending_.erase(it) : std::next(it);
    }
  }

  void close() override {
    drain();
    char c = 0;
    MPI_Send(&c, 1, MPI_BYTE, 0, kTagDone, control_);
  }

 private:
  struct Pending {
    std::string bytes;
    MPI_Request request;
  };
  void drain() {
    for (auto& p : pending_) MPI_Wait(&p.request, MPI_STATUS_IGNORE);
    pending_.clear();
  }
  MPI_Comm control_;
  bool requested_ = false;
  bool exhausted_ = false;
  std::list<Pending> pending_;  // list: buffers must not move while in flight
};

}  // namespace

RowDispatcher::RowDispatcher(const std::string& input_path, std::vector<uint8_t> done_rows, ResultWriter& writer,
                             Progress& progress, MPI_Comm control, int remote_replicas)
    : reader_(input_path),
      done_(std::move(done_rows)),
      writer_(writer),
      progress_(progress),
      control_(control),
      remote_replicas_(remote_replicas),
      last_flush_(now_seconds()) {}

bool RowDispatcher::read_rows(std::vector<WorkItem>& out, size_t max_items) {
  std::string line;
  size_t taken = 0;
  if (stop_requested()) exhausted_ = true;  // graceful stop: hand out no more rows
  while (!exhausted_ && taken < max_items) {
    if (!reader_.next(line)) {
      exhausted_ = true;
      break;
    }
    const int64_t index = next_index_++;
    if (index < static_cast<int64_t>(done_.size()) && done_[index]) continue;  // resume: already done
    out.push_back(WorkItem{index, line});
    ++taken;
  }
  return !exhausted_;
}

void RowDispatcher::record(const RowResult& row) {
  progress_.row_done(row, row.ttft_seconds, row.tpot_seconds);
  writer_.write(row);
  const double t = now_seconds();
  if (t - last_flush_ > 1.0 || ++unflushed_ >= 64) {  // a crash loses at most a second or 64 rows
    writer_.flush();
    last_flush_ = t;
    unflushed_ = 0;
  }
  progress_.maybe_print();
}

void RowDispatcher::handle(const MPI_Status& st) {
  int count = 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
  std::string buf(static_cast<size_t>(count), '\0');
  MPI_Recv(buf.data(), count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, control_, MPI_STATUS_IGNORE);
  if (st.MPI_TAG == kTagRequest) {
    int32_t want = 0;
    std::memcpy(&want, buf.data(), std::min<size_t>(4, buf.size()));
    std::vector<WorkItem> items;
    const bool more = read_rows(items, static_cast<size_t>(want));
    const std::string m = encode_work(items, !more);
    MPI_Send(m.data(), static_cast<int>(m.size()), MPI_BYTE, st.MPI_SOURCE, kTagWork, control_);
  } else if (st.MPI_TAG == kTagResult) {
    record(deserialize_row_result(buf));
  } else if (st.MPI_TAG == kTagDone) {
    ++remote_done_;
  }
}

void RowDispatcher::serve(bool wait) {
  for (;;) {
    MPI_Status st;
    int ready = 0;
    if (wait) {
      MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, control_, &st);
      ready = 1;
      wait = false;
    } else {
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, control_, &ready, &st);
    }
    if (!ready) return;
    handle(st);
  }
}

std::unique_ptr<WorkSource> make_local_work_source(RowDispatcher& d) { return std::make_unique<LocalWorkSource>(d); }
std::unique_ptr<WorkSource> make_remote_work_source(MPI_Comm control) {
  return std::make_unique<RemoteWorkSource>(control);
}

}  // namespace tpbatch
