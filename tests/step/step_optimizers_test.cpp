// The optimizers other than AdamW (step/optimizer_choice.h), each number derived here by hand on the
// Llama toy of the steady-state oracle's cases (tests/data/step/steady/, where every case of these
// optimizers is compared whole by step_steady_oracle_test.cpp): torch.optim's SGD and Adafactor in their
// forms, bitsandbytes' AdamW8bit and PagedAdamW8bit, torchao's AdamW8bit and AdamW4bit, Muon beside
// AdamW, and torchtune's optimizer in the backward.
//
// The toy: hidden 256, intermediate 512, vocabulary 4,096, 4 layers of 8 query and 2 key-value heads of
// 32. Its 39 bf16 parameters, in order: the embedding [4096, 256]; per layer q [256, 256], k and v
// [64, 256], o [256, 256], gate and up [512, 256], down [256, 512] and two norms [256]; the final norm
// [256]; the head [4096, 256]. 4,327,680 elements, P = 8,655,360 B; its rotary buffers 128 B.
#include <gtest/gtest.h>

#include "models/registry.h"
#include "step/step_census.h"
#include "step_cases.h"

namespace census {
namespace {

constexpr int64_t kP = 8'655'360, kBuffers = 128;

ModelConfig llama_toy() {
  auto config =
      read_config(testing::step_case("llama_toy_L4_s128_single_adamw_steady", "step/steady").at("config"));
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

StepOptions stepping(StepOptimizer optimizer, std::optional<nn::OptimizerImpl> impl = std::nullopt,
                     bool first_step = false) {
  StepOptions o;
  o.seq_length = 128;
  o.optimizer = optimizer;
  o.optimizer_impl = impl;
  o.first_step = first_step;
  return o;
}

StepCensus run(const StepOptions& o) { return testing::step_or_throw(llama_toy(), o); }

// SGD with momentum keeps one buffer a parameter, its gradient's size: P. No form makes anything else in
// its step, so the optimizer step's peak is what it starts from: parameters, gradients, buffers and the
// momentum, 3 P + 128. Step 1 makes the buffers in its step (the for-loop's and foreach's
// grad.detach().clone(), the fused form's empty_like) and reaches the same moment.
TEST(StepOptimizers, SgdHoldsOneMomentumBufferAParameter) {
  for (nn::OptimizerImpl impl : {nn::OptimizerImpl::kForLoop, nn::OptimizerImpl::kForEach, nn::OptimizerImpl::kFused}) {
    SCOPED_TRACE(std::string(nn::optimizer_impl_name(impl)));
    const StepCensus steady = run(stepping(StepOptimizer::kSGD, impl));
    EXPECT_EQ(steady.optimizer_state_bytes, kP);
    EXPECT_EQ(steady.analysis.phases[0].live_at_end, 2 * kP + kBuffers);
    EXPECT_EQ(steady.optimizer_step_peak.bytes, 3 * kP + kBuffers);  // 25,966,208
    const StepCensus first = run(stepping(StepOptimizer::kSGD, impl, /*first_step=*/true));
    EXPECT_EQ(first.analysis.phases[0].live_at_end, kP + kBuffers);
    EXPECT_EQ(first.optimizer_step_peak.bytes, 3 * kP + kBuffers);
  }
  // Left out, the form is PyTorch's default on CUDA, foreach: the same answer as naming it.
  const StepCensus plain = run(stepping(StepOptimizer::kSGD));
  const StepCensus foreach = run(stepping(StepOptimizer::kSGD, nn::OptimizerImpl::kForEach));
  EXPECT_EQ(plain.analysis.peak.bytes, foreach.analysis.peak.bytes);
  EXPECT_EQ(plain.analysis.peak.op, foreach.analysis.peak.op);
}

// Adafactor's states: a 4 B host step count a parameter; a matrix [out, in] keeps a row and a column
// variance, (out + in) bf16 elements; a vector its own size.
//   per layer  q 256 + 256, k and v 64 + 256, o 256 + 256, gate and up 512 + 256, down 256 + 512:
//              3,968 elements, 7,936 B; 4 layers 31,744 B
//   embedding and head  2 x (4,096 + 256) x 2 B = 17,408 B;  9 vectors of 256: 4,608 B
//   39 step counts: 156 B                                   total 53,916 B
constexpr int64_t kAdafactorStates = 31'744 + 17'408 + 4'608 + 156;

TEST(StepOptimizers, AdafactorKeepsARowAndAColumnAMatrix) {
  const StepCensus s = run(stepping(StepOptimizer::kAdafactor));
  EXPECT_EQ(s.optimizer_state_bytes, kAdafactorStates);
  EXPECT_EQ(s.analysis.phases[0].live_at_end, kP + kAdafactorStates + kBuffers);
}

// The for-loop's names outlive their iteration: the embedding's update [4096, 256], 2,097,152 B, is alive
// until layer 0's q_proj binds its own, after q_proj's var_estimate = row_var @ col_var [256, 256]
// (131,072 B), its row and column means ([256, 1] and [1, 256], 512 B each) and row_var.mean (2 B) are
// made: the step's most. The foreach form holds every matrix's var_estimate in one list (the group's
// 30 matrices, 8,650,752 B) while the vectors' group makes its grads squared (9 x 512 B): P.
TEST(StepOptimizers, AdafactorsUpdateOutlivesItsParameter) {
  const int64_t start = 2 * kP + kAdafactorStates + kBuffers;  // 17,364,764
  const StepCensus loop = run(stepping(StepOptimizer::kAdafactor, nn::OptimizerImpl::kForLoop));
  EXPECT_EQ(loop.optimizer_step_peak.bytes, start + 2'097'152 + 131'072 + 512 + 512 + 2);  // 19,594,014
  const StepCensus foreach = run(stepping(StepOptimizer::kAdafactor, nn::OptimizerImpl::kForEach));
  EXPECT_EQ(foreach.optimizer_step_peak.bytes, start + 8'650'752 + 9 * 512);
  EXPECT_EQ(foreach.optimizer_step_peak.bytes, start + kP);
  EXPECT_EQ(foreach.analysis.peak.op, "aten._foreach_mul.List");
}

// bitsandbytes' AdamW8bit: a parameter of 4,096 elements or more keeps two uint8 states of its size and two
// fp32 block maxima a 256-element block; a smaller one two fp32 states; the two quantile maps, fp32 [256],
// once. The 30 matrices: 2 x 4,325,376 + 2 x 4 x 16,896 = 8,785,920 B; the 9 vectors: 9 x 2 x 4 x 256 =
// 18,432 B; the maps 2,048 B. Its kernel allocates nothing: the step's most is where it starts.
constexpr int64_t kEightBitStates = 2 * 4'325'376 + 8 * 16'896 + 18'432 + 2'048;  // 8,806,400

TEST(StepOptimizers, AdamW8bitKeepsAByteAnElementAndABlockMaximum) {
  const StepCensus s = run(stepping(StepOptimizer::kAdamW8bit));
  EXPECT_EQ(s.optimizer_state_bytes, kEightBitStates);
  EXPECT_EQ(s.optimizer_unified_memory_bytes, 0);
  EXPECT_EQ(s.optimizer_step_peak.bytes, 2 * kP + kEightBitStates + kBuffers);  // 26,117,248
}

// PagedAdamW8bit pages the uint8 states of a parameter of 100,000 elements or more: the embedding and head
// (1,048,576 elements each) and the 12 gate, up and down projections (131,072 each), 2 x 3,670,016 B in
// unified memory, outside every device figure. The device keeps the rest: 1,466,368 B.
TEST(StepOptimizers, PagedAdamW8bitLeavesItsLargeStatesOutOfTheDevice) {
  constexpr int64_t kPaged = 2 * (2 * 1'048'576 + 12 * 131'072);  // 7,340,032
  const StepCensus s = run(stepping(StepOptimizer::kPagedAdamW8bit));
  EXPECT_EQ(s.optimizer_state_bytes, kEightBitStates);
  EXPECT_EQ(s.optimizer_unified_memory_bytes, kPaged);
  EXPECT_EQ(s.analysis.phases[0].live_at_end, kP + kEightBitStates - kPaged + kBuffers);
  EXPECT_EQ(s.optimizer_step_peak.bytes, 2 * kP + kEightBitStates - kPaged + kBuffers);
}

// torchao's AdamW8bit and AdamW4bit quantize a moment of a parameter of 4,096 elements or more that the
// block divides (all 30 matrices here), each with a qmap of its own, and keep a smaller one in the
// parameter's dtype; the step count is a host fp32 scalar.
//   8-bit: codes 2 x 4,325,376 B; scales 2 x 16,896 x 4 B; qmaps 30 x 2 x 1,024 B
//   4-bit: codes 2 x 2,162,688 B; scales 2 x 33,792 x 4 B; qmaps 30 x 2 x 64 B
//   both:  9 vectors x 2 x 512 B (bf16 zeros_like); 39 x 4 B of steps
// Their compiled update is stood in for by a kernel that allocates nothing (nn/torchao_adamw.h).
TEST(StepOptimizers, TorchaoQuantizesEachMomentWithAMapOfItsOwn) {
  constexpr int64_t kPlain = 9 * 2 * 512 + 39 * 4;
  constexpr int64_t kEight = 2 * 4'325'376 + 2 * 16'896 * 4 + 30 * 2 * 1'024 + kPlain;  // 8,856,732
  constexpr int64_t kFour = 2 * 2'162'688 + 2 * 33'792 * 4 + 30 * 2 * 64 + kPlain;       // 4,608,924
  const StepCensus eight = run(stepping(StepOptimizer::kTorchaoAdamW8bit));
  EXPECT_EQ(eight.optimizer_state_bytes, kEight);
  EXPECT_EQ(eight.optimizer_step_peak.bytes, 2 * kP + kEight + kBuffers);
  const StepCensus four = run(stepping(StepOptimizer::kTorchaoAdamW4bit));
  EXPECT_EQ(four.optimizer_state_bytes, kFour);
  EXPECT_EQ(four.optimizer_step_peak.bytes, 2 * kP + kFour + kBuffers);
}

// torchtune's optimizer in the backward: each parameter's AdamW steps in its post-accumulate-grad hook and
// frees its gradient there, so no moment holds every gradient. The for-loop AdamW's step peaks at
// P + P + S + its head's sqrt and quotient (38,816,540, above); in the backward the step's most is the
// backward's first op, before any gradient exists: the plain step's backward peak, 37,915,940. Nothing is
// left for the optimizer step: parameters, states and buffers.
TEST(StepOptimizers, InTheBackwardNoMomentHoldsEveryGradient) {
  constexpr int64_t kAdamWStates = 2 * kP + 39 * 4;
  const StepOptions plain = stepping(StepOptimizer::kAdamW, nn::OptimizerImpl::kForLoop);
  StepOptions in_backward = plain;
  in_backward.optimizer_in_backward = true;
  const StepCensus step = run(plain), hooked = run(in_backward);
  EXPECT_EQ(step.analysis.peak.bytes, 2 * kP + kAdamWStates + kBuffers + 2 * 2'097'152 + 512);
  EXPECT_EQ(hooked.analysis.peak.bytes, step.backward_peak.bytes);
  EXPECT_EQ(hooked.analysis.peak.split.gradients(), 0);
  EXPECT_EQ(hooked.optimizer_step_peak.bytes, kP + kAdamWStates + kBuffers);
  EXPECT_EQ(hooked.optimizer_state_bytes, kAdamWStates);
  EXPECT_EQ(hooked.gradient_bytes_at_end, 0);
}

// What the implementations refuse, or what is not priced yet: one line naming the options.
// Muon steps the 2-D weights of the layers, 7 a layer (q, k, v, o, gate, up, down: 557,056 elements),
// with one bf16 momentum buffer each; AdamW the embedding, the head and the 9 vectors (2,099,456 elements)
// with two bf16 moments and a 4 B host step count each:
//   Muon   4 x 557,056 x 2 B                        4,456,448
//   AdamW  2 x 2,099,456 x 2 B + 11 x 4 B           8,397,868       12,854,316 B in all
// Its step's most is AdamW's foreach sqrt of the moments it steps, one list of their size (4,198,912 B),
// beside the parameters, their gradients, the states and the rotary's buffers.
constexpr int64_t kMuonStates = 4 * 557'056 * 2 + 2 * 2'099'456 * 2 + 11 * 4;

TEST(StepOptimizers, MuonStepsTheLayersMatricesAndAdamWTheRest) {
  const StepCensus s = run(stepping(StepOptimizer::kMuon));
  EXPECT_EQ(s.optimizer_state_bytes, kMuonStates);
  EXPECT_EQ(s.analysis.phases[0].live_at_end, kP + kMuonStates + kBuffers);
  EXPECT_EQ(s.optimizer_step_peak.bytes, 2 * kP + kMuonStates + kBuffers + 2'099'456 * 2);  // 34,364,076
}

// With a vocabulary of 256 the embedding and the head are 256 x 256, and Muon's Newton-Schulz iteration
// holds the step's most. For gate and up [512, 256] (X is their transpose, m = 256 rows by n = 512) and
// down [256, 512] alike, from the second of its 5 iterations, as X = addmm(X, gram_update, X) makes the
// new X: the update grad.lerp(buf) made (262,144 B), this iteration's gram and gram_update [256, 256]
// (131,072 B each), the previous X and the new one (262,144 B each): 1,048,576 B.
//   parameters  (2 x 65,536 + 4 x (557,056 + 512) + 256) x 2 B = 4,723,200 B, and as many of gradients
//   states      4,456,448 (Muon) + 2 x (131,072 + 2,304) x 2 B + 44 (AdamW) = 4,989,996 B
TEST(StepOptimizers, MuonsNewtonSchulzIterationHoldsFourMatricesOfTheUpdatesSize) {
  ModelConfig config = llama_toy();
  config.vocab_size = 256;
  const StepCensus s = testing::step_or_throw(config, stepping(StepOptimizer::kMuon));
  const int64_t params = (2 * 65'536 + 4 * (557'056 + 512) + 256) * 2;
  const int64_t states = 4'456'448 + 2 * (131'072 + 2'304) * 2 + 44;
  ASSERT_EQ(s.parameter_bytes, params);
  EXPECT_EQ(s.optimizer_state_bytes, states);
  EXPECT_EQ(s.optimizer_step_peak.bytes, 2 * params + states + kBuffers + 1'048'576);  // 15,485,100
  EXPECT_EQ(s.optimizer_step_peak.op, "aten.addmm.default");
}

TEST(StepOptimizers, AFormAnOptimizerDoesNotHaveIsRefusedByName) {
  const ModelConfig config = llama_toy();
  auto refusal = [&](StepOptions o) {
    const Status status = check_step_options(config, o);
    return status.ok() ? std::string("accepted") : status.refusal().message();
  };
  EXPECT_EQ(refusal(stepping(StepOptimizer::kAdafactor, nn::OptimizerImpl::kFused)),
            "--optimizer-impl fused with --optimizer adafactor: it has no such form; give for-loop or foreach");
  EXPECT_EQ(refusal(stepping(StepOptimizer::kAdamW8bit, nn::OptimizerImpl::kForEach)),
            "--optimizer-impl foreach with --optimizer adamw8bit: it runs one kernel a parameter and has no forms; "
            "drop --optimizer-impl");
  StepOptions zero = stepping(StepOptimizer::kAdafactor);
  zero.composition.data_parallel = 8;
  zero.composition.zero = 1;
  EXPECT_EQ(refusal(zero).substr(0, 33), "--optimizer adafactor with --zero");
  StepOptions fsdp = stepping(StepOptimizer::kPagedAdamW8bit);
  fsdp.fsdp.shards = 8;
  EXPECT_EQ(refusal(fsdp).substr(0, 43), "--optimizer paged-adamw8bit with --fsdp: it");
  StepOptions accumulating = stepping(StepOptimizer::kAdamW);
  accumulating.optimizer_in_backward = true;
  accumulating.micro_batches = 4;
  EXPECT_EQ(refusal(accumulating).substr(0, 56), "--optimizer-in-backward with --micro-batches 4: each gra");
  StepOptions masters = stepping(StepOptimizer::kSGD);
  masters.composition.fp32_master_weights = true;
  EXPECT_EQ(refusal(masters).substr(0, 45), "--master-weights fp32 with --optimizer sgd: t");
  StepOptions sgd_zero = stepping(StepOptimizer::kSGD);
  sgd_zero.composition.data_parallel = 8;
  sgd_zero.composition.zero = 1;
  EXPECT_EQ(refusal(sgd_zero), "accepted");
}

}  // namespace
}  // namespace census
