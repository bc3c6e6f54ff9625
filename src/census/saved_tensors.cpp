#include "census/saved_tensors.h"

namespace census {

std::string_view saved_op_name(SavedOp op) {
  static constexpr std::array<std::string_view, kSavedOpCount> kNames = {
      "attMM", "attBMM", "softmax", "normOp", "ffMM", "ffAct", "dropout", "linrec", "other"};
  return kNames[static_cast<size_t>(op)];
}

namespace {

SavedOp classify(const Tensor& tensor, const OpDef* by_op, const std::vector<ModuleFrame>& modules) {
  // The op's row decides where it has a rule: the attention kernel's saves are its statistics (fp32)
  // and its tensors; the fused SwiGLU keeps the experts' gate and up projections, the activation's input.
  switch (by_op != nullptr ? by_op->saved_bucket : SavedBucketRule::kByModule) {
    case SavedBucketRule::kAttentionKernel:
      return tensor.dtype() == DType::kFloat32 ? SavedOp::kSoftmax : SavedOp::kAttBMM;
    case SavedBucketRule::kActivation:
      return SavedOp::kFfAct;
    case SavedBucketRule::kByModule:
      break;
  }
  if (modules.empty() || modules.back().path.empty()) return SavedOp::kOther;
  const ModuleFrame& frame = modules.back();
  if (frame.kind == ModuleKind::kDeltaRule) return SavedOp::kLinrec;
  if (frame.kind == ModuleKind::kNorm) return SavedOp::kNormOp;
  const std::string_view part = frame.path.substr(0, frame.path.find('.'));
  const bool attention = part.find("attn") != std::string_view::npos || part.find("attention") != std::string_view::npos;
  if (!attention && frame.kind == ModuleKind::kActivation) return SavedOp::kFfAct;
  return attention ? SavedOp::kAttMM : SavedOp::kFfMM;
}

}  // namespace

void SavedTensors::on_save(const Tensor& tensor, const OpDef* by_op) {
  const Storage& storage = *tensor.storage();
  if (storage.is_parameter || seen_.contains(storage.id)) return;
  seen_.insert(storage.id);
  if (storage.id >= static_cast<int64_t>(index_by_id_.size())) index_by_id_.resize(storage.id + 64, -1);
  index_by_id_[storage.id] = static_cast<int32_t>(storages_.size());
  const auto& modules = Session::current().modules();
  storages_.push_back(SavedStorage{storage.id, storage.nbytes, classify(tensor, by_op, modules), tensor.dtype(),
                                   tensor.sizes(), modules.empty() ? std::string_view() : modules.back().path,
                                   by_op != nullptr ? by_op->name : std::string_view("input")});
}

void SavedTensors::on_resize(const Storage& storage, int64_t /*old_nbytes*/) {
  if (!seen_.contains(storage.id)) return;
  storages_[static_cast<size_t>(index_by_id_[storage.id])].bytes = storage.nbytes;
}

}  // namespace census
