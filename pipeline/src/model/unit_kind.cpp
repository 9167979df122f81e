#include <string>
#include <string_view>

#include "ppb/pipeline/model.hpp"

namespace ppb {

const char* unit_kind_name(UnitKind kind) {
  switch (kind) {
    case UnitKind::kEmbedding:
      return "embedding";
    case UnitKind::kLayerNorm1:
      return "ln1";
    case UnitKind::kQkv:
      return "qkv";
    case UnitKind::kAttention:
      return "attention";
    case UnitKind::kAttnOut:
      return "attn_out";
    case UnitKind::kLayerNorm2:
      return "ln2";
    case UnitKind::kFc1Gelu:
      return "fc1_gelu";
    case UnitKind::kFc2:
      return "fc2";
    case UnitKind::kFinalNorm:
      return "final_norm";
    case UnitKind::kHead:
      return "head";
  }
  return "unknown";
}

bool is_unit_kind_name(std::string_view name) {
  for (int k = 0; k < kUnitKinds; ++k) {
    if (name == unit_kind_name(static_cast<UnitKind>(k))) return true;
  }
  return false;
}

std::string unit_kind_names() {
  std::string out;
  for (int k = 0; k < kUnitKinds; ++k) {
    out += (k > 0 ? ", " : "");
    out += unit_kind_name(static_cast<UnitKind>(k));
  }
  return out;
}

}  // namespace ppb
