#pragma once
// Backend-owned memory. A Buffer is `count` elements of one dtype that its Backend allocated
// (host memory on the CPU backend, device memory on CUDA) and frees when the Buffer goes. Host
// code passes BufferViews of it to backend operations and may do offset arithmetic on them, but
// never dereferences one: on CUDA the address is a device address, and the CPU backend's checked
// mode keeps its memory unreadable outside backend calls so that any such access crashes in CI.
// The only way to read backend memory is Backend::download (or a Communicator on the data plane).
#include <cstddef>
#include <cstdint>
#include <utility>

#include "backend/dtype.h"

namespace tpbatch {

class Backend;

struct BufferView {
  void* data = nullptr;
  DType dtype = DType::F32;

  // The view `elems` elements further on.
  BufferView at(int64_t elems) const {
    return {static_cast<char*>(data) + elems * static_cast<int64_t>(dtype_size(dtype)), dtype};
  }
  bool empty() const { return data == nullptr; }
  // For backend implementations only: the raw address.
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* owner, void* data, size_t count, DType dtype) : owner_(owner), data_(data), count_(count), dtype_(dtype) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      std::swap(owner_, o.owner_);
      std::swap(data_, o.data_);
      std::swap(count_, o.count_);
      std::swap(dtype_, o.dtype_);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  size_t count() const { return count_; }
  DType dtype() const { return dtype_; }
  size_t bytes() const { return count_ * dtype_size(dtype_); }
  bool empty() const { return count_ == 0; }
  BufferView view(int64_t offset = 0) const { return BufferView{data_, dtype_}.at(offset); }
  void reset();  // frees through the owner (defined in backend.cpp)

 private:
  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  size_t count_ = 0;
  DType dtype_ = DType::F32;
};

}  // namespace tpbatch
