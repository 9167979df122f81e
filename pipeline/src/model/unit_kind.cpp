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

}  // namespace ppb
