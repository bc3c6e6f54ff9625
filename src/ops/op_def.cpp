#include "ops/op_def.h"

#include <array>
#include <cassert>

#include "tensor/tensor.h"

namespace census {
namespace {

constexpr std::array<OpDef, static_cast<size_t>(Op::kCount)> kCatalogue = {{
    {Op::kToCopy, "aten._to_copy.default", OpKind::kCompute},
    {Op::kPowTensorScalar, "aten.pow.Tensor_Scalar", OpKind::kCompute},
    {Op::kRsqrt, "aten.rsqrt.default", OpKind::kCompute},
    {Op::kMulTensor, "aten.mul.Tensor", OpKind::kCompute},
    {Op::kMulScalar, "aten.mul.Scalar", OpKind::kCompute},
    {Op::kDivScalar, "aten.div.Scalar", OpKind::kCompute},
    {Op::kAddTensor, "aten.add.Tensor", OpKind::kCompute},
    {Op::kAddInplace, "aten.add_.Tensor", OpKind::kInPlace},
    {Op::kNeg, "aten.neg.default", OpKind::kCompute},
    {Op::kSilu, "aten.silu.default", OpKind::kCompute},
    {Op::kSiluBackward, "aten.silu_backward.default", OpKind::kCompute},
    {Op::kRelu, "aten.relu.default", OpKind::kCompute},
    {Op::kThresholdBackward, "aten.threshold_backward.default", OpKind::kCompute},
    {Op::kGelu, "aten.gelu.default", OpKind::kCompute},
    {Op::kGeluBackward, "aten.gelu_backward.default", OpKind::kCompute},
    {Op::kCos, "aten.cos.default", OpKind::kCompute},
    {Op::kSin, "aten.sin.default", OpKind::kCompute},
    {Op::kClone, "aten.clone.default", OpKind::kCompute},
    {Op::kCopyInplace, "aten.copy_.default", OpKind::kInPlace},
    {Op::kMeanDim, "aten.mean.dim", OpKind::kCompute},
    {Op::kSumDimIntList, "aten.sum.dim_IntList", OpKind::kCompute},
    {Op::kView, "aten.view.default", OpKind::kView},
    // _unsafe_view is not an alias op in ATen's schema: observers count it as a launch, as PyTorch does.
    {Op::kUnsafeView, "aten._unsafe_view.default", OpKind::kCompute},
    {Op::kT, "aten.t.default", OpKind::kView},
    {Op::kTranspose, "aten.transpose.int", OpKind::kView},
    {Op::kUnsqueeze, "aten.unsqueeze.default", OpKind::kView},
    {Op::kSqueezeDim, "aten.squeeze.dim", OpKind::kView},
    {Op::kSlice, "aten.slice.Tensor", OpKind::kView},
    {Op::kExpand, "aten.expand.default", OpKind::kView},
    {Op::kCat, "aten.cat.default", OpKind::kCompute},
    {Op::kArange, "aten.arange.default", OpKind::kFactory},
    {Op::kNewZeros, "aten.new_zeros.default", OpKind::kFactory},
    {Op::kEmptyLike, "aten.empty_like.default", OpKind::kFactory},
    {Op::kEmpty, "aten.empty.memory_format", OpKind::kFactory},
    {Op::kMm, "aten.mm.default", OpKind::kMatmul, SacClass::kAlternate, FlopsRule::kMatmul},
    {Op::kAddmm, "aten.addmm.default", OpKind::kMatmul, SacClass::kAlwaysSave, FlopsRule::kBiasedMatmul},
    {Op::kLogSoftmax, "aten._log_softmax.default", OpKind::kCompute},
    {Op::kLogSoftmaxBackward, "aten._log_softmax_backward_data.default", OpKind::kCompute},
    {Op::kNllLossForward, "aten.nll_loss_forward.default", OpKind::kCompute},
    {Op::kNllLossBackward, "aten.nll_loss_backward.default", OpKind::kCompute},
    {Op::kConstantPadNd, "aten.constant_pad_nd.default", OpKind::kCompute},
    {Op::kOnesLike, "aten.ones_like.default", OpKind::kFactory},
    {Op::kTanh, "aten.tanh.default", OpKind::kCompute},
    {Op::kTanhBackward, "aten.tanh_backward.default", OpKind::kCompute},
    {Op::kSigmoid, "aten.sigmoid.default", OpKind::kCompute},
    {Op::kSigmoidBackward, "aten.sigmoid_backward.default", OpKind::kCompute},
    {Op::kSoftmax, "aten._softmax.default", OpKind::kCompute},
    {Op::kSoftmaxBackward, "aten._softmax_backward_data.default", OpKind::kCompute},
    {Op::kDivTensor, "aten.div.Tensor", OpKind::kCompute},
    {Op::kDivInplace, "aten.div_.Tensor", OpKind::kInPlace},
    {Op::kGeScalar, "aten.ge.Scalar", OpKind::kCompute},
    {Op::kFloorDivide, "aten.floor_divide.default", OpKind::kCompute},
    {Op::kClampInplace, "aten.clamp_.default", OpKind::kInPlace},
    {Op::kBitwiseNot, "aten.bitwise_not.default", OpKind::kCompute},
    {Op::kTopk, "aten.topk.default", OpKind::kCompute},
    {Op::kSort, "aten.sort.default", OpKind::kCompute},
    {Op::kIndexTensor, "aten.index.Tensor", OpKind::kCompute},
    {Op::kIndexPut, "aten.index_put.default", OpKind::kCompute},
    {Op::kIndexPutInplace, "aten.index_put_.default", OpKind::kInPlace},
    {Op::kGather, "aten.gather.default", OpKind::kCompute},
    {Op::kScatter, "aten.scatter.src", OpKind::kCompute},
    {Op::kScatterAdd, "aten.scatter_add.default", OpKind::kCompute},
    {Op::kScatterInplace, "aten.scatter_.value", OpKind::kInPlace},
    {Op::kMaskedFill, "aten.masked_fill.Scalar", OpKind::kCompute},
    {Op::kMaskedFillInplace, "aten.masked_fill_.Scalar", OpKind::kInPlace},
    {Op::kHistc, "aten.histc.default", OpKind::kCompute},
    {Op::kCumsum, "aten.cumsum.default", OpKind::kCompute},
    {Op::kZerosLike, "aten.zeros_like.default", OpKind::kFactory},
    {Op::kZeros, "aten.zeros.default", OpKind::kFactory},
    {Op::kSplit, "aten.split.Tensor", OpKind::kView},
    {Op::kSplitWithSizes, "aten.split_with_sizes.default", OpKind::kView},
    {Op::kGroupedMm, "aten._grouped_mm.default", OpKind::kMatmul, SacClass::kAlternate, FlopsRule::kMatmul},
    {Op::kSub, "aten.sub.Tensor", OpKind::kCompute},
    {Op::kNewEmpty, "aten.new_empty.default", OpKind::kFactory},
    {Op::kNewEmptyStrided, "aten.new_empty_strided.default", OpKind::kFactory},
    {Op::kClamp, "aten.clamp.default", OpKind::kCompute},
    {Op::kGtScalar, "aten.gt.Scalar", OpKind::kCompute},
    {Op::kLtScalar, "aten.lt.Scalar", OpKind::kCompute},
    {Op::kLogicalAndInplace, "aten.logical_and_.default", OpKind::kInPlace},
    {Op::kWhere, "aten.where.self", OpKind::kCompute},
    {Op::kScalarTensor, "aten.scalar_tensor.default", OpKind::kFactory},
    {Op::kAminmax, "aten.aminmax.default", OpKind::kCompute},
    // A scalar read (Tensor.item(), bool(tensor)): a launch that reads its 0-d input, no tensor out.
    {Op::kLocalScalarDense, "aten._local_scalar_dense.default", OpKind::kCompute},
    {Op::kNonzero, "aten.nonzero.default", OpKind::kCompute},
    {Op::kEqScalar, "aten.eq.Scalar", OpKind::kCompute},
    {Op::kSelect, "aten.select.int", OpKind::kView},
    {Op::kSelectBackward, "aten.select_backward.default", OpKind::kCompute},
    {Op::kUnbind, "aten.unbind.int", OpKind::kView},
    {Op::kPermute, "aten.permute.default", OpKind::kView},
    {Op::kIndexAddInplace, "aten.index_add_.default", OpKind::kInPlace},
    {Op::kIndexSelect, "aten.index_select.default", OpKind::kCompute},
    {Op::kIndexAdd, "aten.index_add.default", OpKind::kCompute},
    // Gated delta net
    {Op::kBmm, "aten.bmm.default", OpKind::kMatmul, SacClass::kAlwaysSave, FlopsRule::kMatmul},
    {Op::kConvolution, "aten.convolution.default", OpKind::kCompute, SacClass::kAlwaysSave},
    {Op::kConvolutionBackward, "aten.convolution_backward.default", OpKind::kCompute},
    {Op::kExp, "aten.exp.default", OpKind::kCompute},
    {Op::kTril, "aten.tril.default", OpKind::kCompute},
    {Op::kTriu, "aten.triu.default", OpKind::kCompute},
    {Op::kFlip, "aten.flip.default", OpKind::kCompute},
    {Op::kSoftplus, "aten.softplus.default", OpKind::kCompute},
    {Op::kSoftplusBackward, "aten.softplus_backward.default", OpKind::kCompute},
    {Op::kOnes, "aten.ones.default", OpKind::kFactory},
    {Op::kEye, "aten.eye.default", OpKind::kFactory},
    {Op::kNpuRmsNorm, "nd_census_npu.rms_norm.default", OpKind::kCompute},
    {Op::kNpuSwiglu, "nd_census_npu.swiglu.default", OpKind::kCompute, SacClass::kRecompute, FlopsRule::kNone,
     SavedBucketRule::kActivation},
    {Op::kNpuRotaryMul, "nd_census_npu.rotary_mul.default", OpKind::kCompute},
    {Op::kNpuMoeTokenPermute, "nd_census_npu.moe_token_permute.default", OpKind::kCompute},
    {Op::kNpuMoeTokenUnpermute, "nd_census_npu.moe_token_unpermute.default", OpKind::kCompute},
    // A plain function in the reference's contracts (its output a new_empty), named here for what it is.
    {Op::kNpuGroupedMatmul, "torch_npu.npu_grouped_matmul.default", OpKind::kCompute},
    {Op::kNpuFusionAttention, "nd_census_npu.fusion_attention.default", OpKind::kAttentionKernel, SacClass::kAlwaysSave,
     FlopsRule::kScores, SavedBucketRule::kAttentionKernel},
    {Op::kFlashAttention, "nd_census.flash_attention.default", OpKind::kAttentionKernel, SacClass::kAlwaysSave,
     FlopsRule::kScores, SavedBucketRule::kAttentionKernel},
    {Op::kCudaFlashAttention, "nd_census.cuda_flash_attention.default", OpKind::kAttentionKernel, SacClass::kAlwaysSave,
     FlopsRule::kScores, SavedBucketRule::kAttentionKernel},
    {Op::kStack, "aten.stack.default", OpKind::kCompute},
    // Dropout off CUDA
    {Op::kBernoulliInplace, "aten.bernoulli_.float", OpKind::kInPlace},
    {Op::kDivInplaceScalar, "aten.div_.Scalar", OpKind::kInPlace},
    // Dropout on CUDA
    {Op::kNativeDropout, "aten.native_dropout.default", OpKind::kCompute},
    {Op::kNativeDropoutBackward, "aten.native_dropout_backward.default", OpKind::kCompute},
    // Llama 4
    {Op::kViewAsComplex, "aten.view_as_complex.default", OpKind::kView},
    {Op::kViewAsReal, "aten.view_as_real.default", OpKind::kView},
    {Op::kPolar, "aten.polar.default", OpKind::kCompute},
    {Op::kLog1p, "aten.log1p.default", OpKind::kCompute},
    {Op::kFloor, "aten.floor.default", OpKind::kCompute},
    {Op::kRepeat, "aten.repeat.default", OpKind::kCompute},
    {Op::kFullLike, "aten.full_like.default", OpKind::kFactory},
    {Op::kScatterSrcInplace, "aten.scatter_.src", OpKind::kInPlace},
    {Op::kEmbedding, "aten.embedding.default", OpKind::kCompute},
    {Op::kEmbeddingDenseBackward, "aten.embedding_dense_backward.default", OpKind::kCompute},
    {Op::kSum, "aten.sum.default", OpKind::kCompute},
    {Op::kNativeLayerNorm, "aten.native_layer_norm.default", OpKind::kCompute},
    {Op::kNativeLayerNormBackward, "aten.native_layer_norm_backward.default", OpKind::kCompute},
    {Op::kGtTensor, "aten.gt.Tensor", OpKind::kCompute},
    // A training step's own ops
    {Op::kRandintLow, "aten.randint.low", OpKind::kFactory},
    {Op::kRandn, "aten.randn.default", OpKind::kFactory},
    // torch.tensor(0.0): the new tensor reaches a dispatch mode as lift_fresh of itself.
    {Op::kLiftFresh, "aten.lift_fresh.default", OpKind::kFactory},
    {Op::kSqrt, "aten.sqrt.default", OpKind::kCompute},
    {Op::kMulInplace, "aten.mul_.Tensor", OpKind::kInPlace},
    {Op::kLerpInplace, "aten.lerp_.Scalar", OpKind::kInPlace},
    {Op::kAddcmulInplace, "aten.addcmul_.default", OpKind::kInPlace},
    {Op::kAddcdivInplace, "aten.addcdiv_.default", OpKind::kInPlace},
    // AdamW's foreach and fused forms: one op over each list
    {Op::kForeachAddInplaceTensor, "aten._foreach_add_.Tensor", OpKind::kInPlace},
    {Op::kForeachAddInplaceScalar, "aten._foreach_add_.Scalar", OpKind::kInPlace},
    {Op::kForeachMulInplaceScalar, "aten._foreach_mul_.Scalar", OpKind::kInPlace},
    {Op::kForeachLerpInplaceScalar, "aten._foreach_lerp_.Scalar", OpKind::kInPlace},
    {Op::kForeachAddcmulInplaceScalar, "aten._foreach_addcmul_.Scalar", OpKind::kInPlace},
    {Op::kForeachSqrt, "aten._foreach_sqrt.default", OpKind::kCompute},
    {Op::kForeachDivInplaceScalarList, "aten._foreach_div_.ScalarList", OpKind::kInPlace},
    {Op::kForeachAddcdivInplaceScalarList, "aten._foreach_addcdiv_.ScalarList", OpKind::kInPlace},
    {Op::kFusedAdamwInplace, "aten._fused_adamw_.default", OpKind::kInPlace},
    // The other optimizers
    {Op::kLinalgVectorNorm, "aten.linalg_vector_norm.default", OpKind::kCompute},
    {Op::kPowInplaceScalar, "aten.pow_.Scalar", OpKind::kInPlace},
    {Op::kRsqrtInplace, "aten.rsqrt_.default", OpKind::kInPlace},
    {Op::kForeachAddInplaceList, "aten._foreach_add_.List", OpKind::kInPlace},
    {Op::kForeachMulInplaceList, "aten._foreach_mul_.List", OpKind::kInPlace},
    {Op::kForeachMulInplaceScalarList, "aten._foreach_mul_.ScalarList", OpKind::kInPlace},
    {Op::kForeachMulList, "aten._foreach_mul.List", OpKind::kCompute},
    {Op::kForeachDivInplaceList, "aten._foreach_div_.List", OpKind::kInPlace},
    {Op::kForeachLerpInplaceScalarList, "aten._foreach_lerp_.ScalarList", OpKind::kInPlace},
    {Op::kForeachClampMinInplaceScalar, "aten._foreach_clamp_min_.Scalar", OpKind::kInPlace},
    {Op::kForeachRsqrtInplace, "aten._foreach_rsqrt_.default", OpKind::kInPlace},
    {Op::kFusedSgdInplace, "aten._fused_sgd_.default", OpKind::kInPlace},
    {Op::kBnbOptimizerUpdate32bit, "bitsandbytes.optimizer_update_32bit.default", OpKind::kInPlace},
    {Op::kBnbOptimizerUpdate8bitBlockwise, "bitsandbytes.optimizer_update_8bit_blockwise.default", OpKind::kInPlace},
    // DeepSeek-V4
    {Op::kGeTensor, "aten.ge.Tensor", OpKind::kCompute},
    {Op::kNewFull, "aten.new_full.default", OpKind::kFactory},
    // Collectives: a rank's output buffer, zero FLOPs; wait_tensor returns its input (c10d's kernel)
    {Op::kAllGatherIntoTensor, "_c10d_functional.all_gather_into_tensor.default", OpKind::kCollective},
    {Op::kReduceScatterTensor, "_c10d_functional.reduce_scatter_tensor.default", OpKind::kCollective},
    {Op::kAllReduce, "_c10d_functional.all_reduce.default", OpKind::kCollective},
    {Op::kAllToAllSingle, "_c10d_functional.all_to_all_single.default", OpKind::kCollective},
    {Op::kWaitTensor, "_c10d_functional.wait_tensor.default", OpKind::kView},
    // DTensor's local ops under tensor parallelism
    {Op::kOrTensor, "aten.__or__.Tensor", OpKind::kCompute},
    {Op::kAmax, "aten.amax.default", OpKind::kCompute},
    {Op::kLog, "aten.log.default", OpKind::kCompute},
    {Op::kNeScalar, "aten.ne.Scalar", OpKind::kCompute},
    {Op::kWhereScalarOther, "aten.where.ScalarOther", OpKind::kCompute},
    {Op::kToDevice, "aten.to.device", OpKind::kCompute},
    {Op::kToDtype, "aten.to.dtype", OpKind::kCompute},
    // TRL's chunked loss
    {Op::kSortStable, "aten.sort.stable", OpKind::kCompute},
    {Op::kArgmax, "aten.argmax.default", OpKind::kCompute},
    {Op::kEqTensor, "aten.eq.Tensor", OpKind::kCompute},
    {Op::kBitwiseAndTensor, "aten.bitwise_and.Tensor", OpKind::kCompute},
    {Op::kCeil, "aten.ceil.default", OpKind::kCompute},
    // Muon's update
    {Op::kLerpScalar, "aten.lerp.Scalar", OpKind::kCompute},
    // Liger's Triton kernels, named as Liger's ops/*.py name them (no aten op: a fake-tensor trace never sees
    // them); each writes into tensors its Python made before the launch
    {Op::kLigerRmsNormForward, "liger._rms_norm_forward_kernel.default", OpKind::kInPlace},
    {Op::kLigerRmsNormBackward, "liger._rms_norm_backward_kernel.default", OpKind::kInPlace},
    {Op::kLigerSwigluForward, "liger._swiglu_forward_kernel.default", OpKind::kInPlace, SacClass::kRecompute, FlopsRule::kNone,
     SavedBucketRule::kActivation},
    {Op::kLigerSwigluBackward, "liger._swiglu_backward_kernel.default", OpKind::kInPlace},
    {Op::kLigerRopeForward, "liger._triton_rope.default", OpKind::kInPlace},
    {Op::kLigerRopeBackward, "liger._triton_rope.backward_pass", OpKind::kInPlace},
    {Op::kLigerGegluForward, "liger._geglu_tanh_forward_kernel.default", OpKind::kInPlace, SacClass::kRecompute,
     FlopsRule::kNone, SavedBucketRule::kActivation},
    {Op::kLigerGegluBackward, "liger._geglu_tanh_backward_kernel.default", OpKind::kInPlace},
    {Op::kAbs, "aten.abs.default", OpKind::kCompute},
    {Op::kMax, "aten.max.default", OpKind::kCompute},
    {Op::kReciprocal, "aten.reciprocal.default", OpKind::kCompute},
    {Op::kLog2, "aten.log2.default", OpKind::kCompute},
    {Op::kExp2, "aten.exp2.default", OpKind::kCompute},
    {Op::kNewOnes, "aten.new_ones.default", OpKind::kFactory},
    {Op::kContiguous, "aten.contiguous.default", OpKind::kCompute},
    {Op::kScaledMm, "aten._scaled_mm.default", OpKind::kMatmul, SacClass::kAlwaysSave, FlopsRule::kMatmul},  // torchtitan saves it
    // bitsandbytes' custom ops, named as torch.ops names them
    {Op::kBnbGemm4bit, "bitsandbytes.gemm_4bit.default", OpKind::kMatmul, SacClass::kAlwaysSave, FlopsRule::kGemm4bit},
    {Op::kBnbDequantize4bit, "bitsandbytes.dequantize_4bit.default", OpKind::kCompute},
    {Op::kBnbDequantizeBlockwise, "bitsandbytes.dequantize_blockwise.default", OpKind::kCompute},
}};

constexpr bool catalogue_in_order() {
  for (size_t i = 0; i < kCatalogue.size(); ++i)
    if (static_cast<size_t>(kCatalogue[i].op) != i) return false;
  return true;
}
static_assert(catalogue_in_order(), "kCatalogue rows must follow the order of enum Op");

}  // namespace

const OpDef& op_def(Op op) { return kCatalogue[static_cast<size_t>(op)]; }

std::span<const OpDef> op_catalogue() { return kCatalogue; }

int64_t OpDef::flops(std::span<const Tensor> inputs) const {
  constexpr int64_t kFmaFlops = 2;  // a multiply and an add per term
  switch (flops_rule) {
    case FlopsRule::kNone:
      return 0;
    case FlopsRule::kMatmul:
      return kFmaFlops * inputs[0].numel() * inputs[1].size(-1);
    case FlopsRule::kBiasedMatmul:
      return kFmaFlops * inputs[1].numel() * inputs[2].size(-1);
    case FlopsRule::kGemm4bit: {
      // The packed weight holds its (out, in) elements two to a byte (an odd count rounded up).
      const int64_t packed_bytes = inputs[1].nbytes();
      return kFmaFlops * inputs[0].numel() * (2 * packed_bytes / inputs[0].size(-1));
    }
    case FlopsRule::kScores: {
      const Tensor& query = inputs[0];
      const Tensor& key = inputs[1];
      const Tensor& value = inputs[2];
      return kFmaFlops * query.size(0) * query.size(1) * query.size(2) * key.size(2) * (query.size(3) + value.size(-1));
    }
  }
  return 0;
}

}  // namespace census
