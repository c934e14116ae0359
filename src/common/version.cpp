#include "common/version.h"
namespace tpbatch {
const char* version() { return TPBATCH_VERSION; }
}  // namespace tpbatch
