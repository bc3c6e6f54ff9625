// File: op_def.h
// The op catalogue: one OpDef per aten overload a census dispatches, named as ATen names it. A row
// states every fact about an op that is data, so that a policy or an observer reads it instead of
// knowing the op: its kind (a view moves no bytes and allocates nothing), its class under the
// selective checkpoint policy, how its FLOPs are counted, and which saved-op bucket the tensors saved
// right after it fall in where the op decides that. What each op saves and what its backward runs live
// beside its function in ops/*.cpp, one place per op.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace census {

enum class OpKind : uint8_t {
  kCompute,          // allocates its outputs and runs a kernel
  kView,             // aliases its input's storage; no kernel, no bytes moved
  kInPlace,          // writes into its first argument (a Triton kernel: into the outputs its Python made)
  kMatmul,           // mm, addmm, bmm, _grouped_mm, bitsandbytes' gemm_4bit: their FLOPs by their rule
  kAttentionKernel,  // the census's flash-attention contract: its FLOPs are the scores', its saves attBMM/softmax
  kFactory,          // creates a tensor from no tensor input (arange, empty, zeros)
  kCollective,       // a c10d functional collective: its output allocated on the rank, no FLOPs, bytes on
                     // the wire (collective_wire_bytes)
};

// HyperParallel's selective policy (Note [Selective checkpoint policy]).
enum class SacClass : uint8_t {
  kRecompute,   // left to the backward to run again
  kAlternate,   // mm and _grouped_mm, counted together: the 1st, 3rd, ... saved
  kAlwaysSave,  // addmm, bmm, the convolution, the attention kernels
};

enum class FlopsRule : uint8_t {
  kNone,
  kMatmul,        // 2 * numel(first input) * last dim of the second
  kBiasedMatmul,  // addmm: the same of its 2nd and 3rd inputs (the bias aside)
  kScores,        // the attention kernel: QK^T and AV at every pair of tokens (causal mask explicit)
  kGemm4bit,      // bitsandbytes' gemm_4bit: 2 * numel(A) * N, N the packed weight's (out, in) over A's last dim
};

// The saved-op bucket of what is saved right after the op runs, where the op decides it (else the
// module running does).
enum class SavedBucketRule : uint8_t {
  kByModule,
  kAttentionKernel,  // fp32 (the softmax statistics) softmax, else attBMM
  kActivation,       // ffAct (a fused activation's contract)
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
  // Loss, and the logits' softcapping (Gemma 2)
  kLogSoftmax, kLogSoftmaxBackward, kNllLossForward, kNllLossBackward, kConstantPadNd, kOnesLike, kTanh,
  kTanhBackward,
  // Routing and experts (mixture-of-experts layers)
  kSigmoid, kSigmoidBackward, kSoftmax, kSoftmaxBackward, kDivTensor, kDivInplace, kGeScalar, kFloorDivide,
  kClampInplace, kBitwiseNot, kTopk, kSort, kIndexTensor, kIndexPut, kIndexPutInplace, kGather, kScatter,
  kScatterAdd, kScatterInplace, kMaskedFill, kMaskedFillInplace, kHistc, kCumsum, kZerosLike, kZeros,
  kSplit, kSplitWithSizes, kGroupedMm, kSub, kNewEmpty, kNewEmptyStrided,
  kClamp, kGtScalar, kLtScalar, kLogicalAndInplace, kWhere, kScalarTensor,
  kAminmax, kLocalScalarDense, kNonzero, kEqScalar, kSelect, kSelectBackward, kUnbind, kPermute, kIndexAddInplace, kIndexSelect,
  kIndexAdd,
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
  // Dropout on CUDA (ops/dropout.cpp): the fused kernel, its output and a bool mask
  kNativeDropout, kNativeDropoutBackward,
  // Llama 4 (ops/complex.cpp, ops/llama4.cpp): its complex rotary, attention temperature and router
  kViewAsComplex, kViewAsReal, kPolar, kLog1p, kFloor, kRepeat, kFullLike, kScatterSrcInplace,
  // The model around its layers (the stack census): the token embedding, the sum a backward starts at
  kEmbedding, kEmbeddingDenseBackward, kSum,
  // DeepSeek-V3.2's Lightning indexer: its key's LayerNorm, its causal mask's comparison
  kNativeLayerNorm, kNativeLayerNormBackward, kGtTensor,
  // A training step's own ops (census step): the step's random inputs, AdamW's
  // update (torch.optim.AdamW with foreach=False) and its scalar state
  kRandintLow, kRandn, kLiftFresh, kSqrt, kMulInplace, kLerpInplace,
  kAddcmulInplace, kAddcdivInplace,
  // AdamW's foreach and fused forms (torch.optim.AdamW's default on CUDA, and fused=True)
  kForeachAddInplaceTensor, kForeachAddInplaceScalar, kForeachMulInplaceScalar, kForeachLerpInplaceScalar,
  kForeachAddcmulInplaceScalar, kForeachSqrt, kForeachDivInplaceScalarList, kForeachAddcdivInplaceScalarList,
  kFusedAdamwInplace,
  // The other optimizers (nn/sgd.h, nn/adafactor.h, nn/adamw8bit.h): their norms and in-place updates,
  // their list forms, and bitsandbytes' update kernels
  kLinalgVectorNorm, kPowInplaceScalar, kRsqrtInplace, kForeachAddInplaceList, kForeachMulInplaceList,
  kForeachMulInplaceScalarList, kForeachMulList, kForeachDivInplaceList, kForeachLerpInplaceScalarList,
  kForeachClampMinInplaceScalar, kForeachRsqrtInplace, kFusedSgdInplace, kBnbOptimizerUpdate32bit,
  kBnbOptimizerUpdate8bitBlockwise,
  // DeepSeek-V4 (ops/compressed_attention.cpp): its compressors' and indexer's masks and index
  // bookkeeping, the router's sqrt(softplus) (sqrt itself is AdamW's row above)
  kGeTensor, kNewFull,
  // Collectives (ops/collectives.cpp): torch's _c10d_functional ops, as DTensor and FSDP2 run them
  kAllGatherIntoTensor, kReduceScatterTensor, kAllReduce, kAllToAllSingle, kWaitTensor,
  // DTensor's local ops under tensor parallelism (ops/vocab_parallel.cpp): a vocabulary-sharded
  // embedding's mask and loss_parallel's log-softmax and NLL on the rank's vocabulary shard
  kOrTensor, kAmax, kLog, kNeScalar, kWhereScalarOther, kToDevice, kToDtype,
  // TRL's chunked loss (nn/trl_chunked_loss.h): its token sort, its accuracy and the count it pads
  kSortStable, kArgmax, kEqTensor, kBitwiseAndTensor, kCeil,
  // Muon's update (nn/muon.h): the Nesterov momentum, out of place
  kLerpScalar,
  // Liger's Triton kernels (ops/liger_kernels.cpp): each writes into tensors its Python made, allocating nothing
  kLigerRmsNormForward, kLigerRmsNormBackward, kLigerSwigluForward, kLigerSwigluBackward, kLigerRopeForward,
  kLigerRopeBackward, kLigerGegluForward, kLigerGegluBackward,
  // torchao's FP8 training (ops/float8.cpp): the casts' amax and scale arithmetic, the fp8 operands'
  // copies, and the scaled matrix product
  kAbs, kMax, kReciprocal, kLog2, kExp2, kNewOnes, kContiguous, kScaledMm,
  // bitsandbytes' 4-bit base (ops/bnb_4bit.cpp): its fused product and its dequantizations
  kBnbGemm4bit, kBnbDequantize4bit, kBnbDequantizeBlockwise,
  kCount,
};

class Tensor;

struct OpDef {
  Op op;
  std::string_view name;  // as ATen prints it: "aten.mm.default"
  OpKind kind;
  SacClass sac = SacClass::kRecompute;
  FlopsRule flops_rule = FlopsRule::kNone;
  SavedBucketRule saved_bucket = SavedBucketRule::kByModule;

  bool is_view() const { return kind == OpKind::kView; }
  bool is_matmul() const { return kind == OpKind::kMatmul; }
  bool is_collective() const { return kind == OpKind::kCollective; }
  // The FLOPs of a call with these tensor arguments, by flops_rule (0 for kNone).
  int64_t flops(std::span<const Tensor> inputs) const;
};

const OpDef& op_def(Op op);
// Every row, in the order of enum Op.
std::span<const OpDef> op_catalogue();

}  // namespace census
