// The device the emulator presents: an H200-shaped device (132 SMs, compute capability 9.0,
// 141 GiB), CUEMU_DEVICES of them (default 1), their PCI bus ids, and the runtime's version and
// error strings.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "host_state.h"

namespace cuemu {
namespace {

thread_local int t_device = 0;  // the runtime's current device is per host thread

int device_count() {
  const char* v = std::getenv("CUEMU_DEVICES");
  return v && *v ? std::atoi(v) : 1;
}
bool valid(int device) { return device >= 0 && device < device_count(); }

}  // namespace
}  // namespace cuemu

using namespace cuemu;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  Lock lk = lock_state();
  if (!valid(device)) return set_error_locked(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = t_device;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  Lock lk = lock_state();
  if (!valid(device)) return set_error_locked(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 227 * 1024; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    default:
      complain("cudaDeviceGetAttribute(%d) is not emulated", int(attr));
      return set_error_locked(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  Lock lk = lock_state();
  if (!valid(device)) return set_error_locked(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "emulated device (H200-shaped)");
  size_t free_bytes = 0;
  lk.unlock();
  cudaMemGetInfo(&free_bytes, &prop->totalGlobalMem);
  prop->multiProcessorCount = 132;
  prop->major = 9;
  prop->minor = 0;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->sharedMemPerBlock = 48 * 1024;
  return cudaSuccess;
}
// One bus id per emulated device index: the emulated devices of every process are the same
// CUEMU_DEVICES devices, so device i is one GPU whichever rank drives it.
cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  Lock lk = lock_state();
  if (!valid(device)) return set_error_locked(cudaErrorInvalidDevice);
  if (!pciBusId || len <= 0) return set_error_locked(cudaErrorInvalidValue);
  std::snprintf(pciBusId, static_cast<size_t>(len), "0000:%02x:00.0", 0x10 + device);
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidPitchValue: return "cudaErrorInvalidPitchValue";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    default: return "cudaError(other)";
  }
}
const char* cudaGetErrorString(cudaError_t e) { return cudaGetErrorName(e); }

}  // extern "C"
