#pragma once
namespace tpbatch {
const char* version();
}  // namespace tpbatch
