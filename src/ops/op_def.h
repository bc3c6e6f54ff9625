// File: op_def.h
// The op catalogue: one OpDef per aten overload a census dispatches, named as ATen names it. An entry
// states the facts an observer needs without knowing the op: whether it is a view (a view moves no
// bytes and allocates nothing), and whether it is a matmul or an attention kernel (whose FLOPs and
// saves are priced apart). What each op saves and what its backward runs live beside its function
// in ops/*.cpp, one place per op.
#pragma once

#include <cstdint>
#include <string_view>

namespace census {

enum class OpKind : uint8_t {
  kCompute,          // allocates its outputs and runs a kernel
  kView,             // aliases its input's storage; no kernel, no bytes moved
  kInPlace,          // writes into its first argument
  kMatmul,           // mm, addmm, bmm, _grouped_mm: FLOPs = 2 * numel(first) * last dim of second
  kAttentionKernel,  // the census's flash-attention contract: its FLOPs are the scores', its saves attBMM/softmax
  kFactory,          // creates a tensor from no tensor input (arange, empty, zeros)
};

enum class Op : uint8_t {
  // Elementwise and arithmetic
  kToCopy, kPowTensorScalar, kRsqrt, kMulTensor, kMulScalar, kDivScalar, kAddTensor, kAddInplace,
  kNeg, kSilu, kSiluBackward, kRelu, kThresholdBackward, kGelu, kGeluBackward, kCos, kSin, kClone, kCopyInplace,
  // Reductions
  kMeanDim, kSumDimIntList,
  // Shapes and views
  kView, kUnsafeView, kT, kTranspose, kUnsqueeze, kSqueezeDim, kSlice, kExpand, kCat,
  // Factories
  kArange, kNewZeros, kEmptyLike, kEmpty,
  // Matrix products
  kMm, kAddmm,
  // Loss
  kLogSoftmax, kLogSoftmaxBackward, kNllLossForward, kNllLossBackward, kConstantPadNd, kOnesLike,
  // Routing and experts (mixture-of-experts layers)
  kSigmoid, kSigmoidBackward, kSoftmax, kSoftmaxBackward, kDivTensor, kDivInplace, kGeScalar, kFloorDivide,
  kClampInplace, kBitwiseNot, kTopk, kSort, kIndexTensor, kIndexPut, kIndexPutInplace, kGather, kScatter,
  kScatterAdd, kScatterInplace, kMaskedFill, kMaskedFillInplace, kHistc, kCumsum, kZerosLike, kZeros,
  kSplit, kSplitWithSizes, kGroupedMm, kSub, kNewEmpty, kNewEmptyStrided,
  kClamp, kGtScalar, kLtScalar, kLogicalAndInplace, kWhere, kScalarTensor,
  kAminmax, kLocalScalarDense, kNonzero, kEqScalar, kSelect, kSelectBackward, kUnbind, kPermute, kIndexAddInplace, kIndexSelect,
  // Gated delta net: the linear-attention layers of Qwen3-Next and Qwen3.5 (their eager rule's ops,
  // the causal depthwise conv, the factories they take)
  kBmm, kConvolution, kConvolutionBackward, kExp, kTril, kTriu, kFlip, kSoftplus, kSoftplusBackward, kOnes, kEye,
  // NPU kernel contracts (HyperParallel's fused modules, torch_npu's kernels)
  kNpuRmsNorm, kNpuSwiglu, kNpuRotaryMul, kNpuMoeTokenPermute, kNpuMoeTokenUnpermute, kNpuGroupedMatmul,
  kNpuFusionAttention,
  // Attention kernel contracts
  kFlashAttention, kCudaFlashAttention,
  // ERNIE-4.5's interleaved rotary (ops/stack.cpp)
  kStack,
  // Dropout off CUDA (ops/dropout.cpp): the noise tensor F.dropout draws and scales in place
  kBernoulliInplace, kDivInplaceScalar,
  // Llama 4 (ops/complex.cpp, ops/llama4.cpp): its complex rotary, attention temperature and router
  kViewAsComplex, kViewAsReal, kPolar, kLog1p, kFloor, kRepeat, kFullLike, kScatterSrcInplace,
  // A training step's own ops (census step): the token embedding, the step's random inputs, AdamW's
  // update (torch.optim.AdamW with foreach=False) and its scalar state
  kEmbedding, kEmbeddingDenseBackward, kRandintLow, kRandn, kLiftFresh, kSqrt, kMulInplace, kLerpInplace,
  kAddcmulInplace, kAddcdivInplace,
  kCount,
};

struct OpDef {
  Op op;
  std::string_view name;  // as ATen prints it: "aten.mm.default"
  OpKind kind;

  bool is_view() const { return kind == OpKind::kView; }
  bool is_matmul() const { return kind == OpKind::kMatmul; }
};

const OpDef& op_def(Op op);

}  // namespace census
