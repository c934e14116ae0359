#include "model/weight_checks.h"

#include <cstdint>
#include <cstring>
#include <set>

#include "common/error.h"

namespace tpbatch {
namespace {

// Index of the first element whose exponent bits are all ones (NaN or Inf), or -1.
template <typename Bits>
int64_t first_non_finite(const std::byte* data, int64_t n, Bits exponent_mask) {
  for (int64_t i = 0; i < n; ++i) {
    Bits v;
    std::memcpy(&v, data + static_cast<size_t>(i) * sizeof(Bits), sizeof v);
    if ((v & exponent_mask) == exponent_mask) return i;
  }
  return -1;
}

// Layer index of "model.layers.<N>.", or -1.
int64_t layer_of(const std::string& name) {
  static const std::string prefix = "model.layers.";
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  int64_t n = 0;
  size_t i = prefix.size();
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) {
    n = n * 10 + (name[i] - '0');
    if (n > (int64_t{1} << 40)) return -1;
  }
  return i < name.size() && name[i] == '.' ? n : -1;
}

}  // namespace

void check_weights_finite(const WeightStore& weights, int rank, int ranks) {
  const std::vector<std::string> names = weights.names();  // sorted: every rank agrees on the split
  for (size_t k = 0; k < names.size(); ++k) {
    if (ranks > 1 && static_cast<int>(k % static_cast<size_t>(ranks)) != rank) continue;
    const TensorInfo& t = weights.tensor(names[k]);
    if (!t.data) continue;
    const int64_t n = t.numel();
    int64_t bad = -1;
    bool is_nan = false;
    switch (t.dtype) {
      case DType::F32: {
        bad = first_non_finite<uint32_t>(t.data, n, 0x7f800000u);
        uint32_t v = 0;
        if (bad >= 0) std::memcpy(&v, t.data + bad * 4, 4), is_nan = (v & 0x007fffffu) != 0;
        break;
      }
      case DType::F16: {
        bad = first_non_finite<uint16_t>(t.data, n, 0x7c00);
        uint16_t v = 0;
        if (bad >= 0) std::memcpy(&v, t.data + bad * 2, 2), is_nan = (v & 0x03ff) != 0;
        break;
      }
      case DType::BF16: {
        bad = first_non_finite<uint16_t>(t.data, n, 0x7f80);
        uint16_t v = 0;
        if (bad >= 0) std::memcpy(&v, t.data + bad * 2, 2), is_nan = (v & 0x007f) != 0;
        break;
      }
      case DType::F8E4M3:  // e4m3 has no infinity; S.1111.111 is its NaN
        bad = first_non_finite<uint8_t>(t.data, n, 0x7f);
        is_nan = true;
        break;
      default:
        break;
    }
    if (bad >= 0)
      throw Error(t.file + ": tensor '" + t.name + "': element " + std::to_string(bad) + " is " +
                  (is_nan ? "NaN" : "Inf") + " (a corrupt or badly converted checkpoint; no row could be right)");
  }
}

std::vector<std::string> unused_layer_tensors(const WeightStore& weights, const ModelConfig& cfg) {
  std::vector<std::string> out;
  for (const std::string& n : weights.names())
    if (layer_of(n) >= cfg.num_layers) out.push_back(n);
  return out;
}

std::string unused_tensors_warning(const std::vector<std::string>& names, const ModelConfig& cfg) {
  if (names.empty()) return "";
  std::set<int64_t> layers;
  for (const auto& n : names) layers.insert(layer_of(n));
  std::string layer_list;
  for (int64_t l : layers) layer_list += (layer_list.empty() ? "" : ", ") + std::to_string(l);
  std::string list;
  for (size_t i = 0; i < names.size() && i < 8; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > 8) list += ", ...";
  return std::to_string(names.size()) + " tensors of the checkpoint are not used: layer" +
         (layers.size() == 1 ? " " : "s ") + layer_list + " (config.json num_hidden_layers = " +
         std::to_string(cfg.num_layers) + "): " + list;
}

}  // namespace tpbatch
