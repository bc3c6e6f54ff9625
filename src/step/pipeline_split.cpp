#include "step/pipeline_split.h"

namespace census {

Result<std::vector<LayerRange>> pipeline_chunks(int64_t layers, int64_t stages, int64_t virtual_stages,
                                                const PipelineSplit& split) {
  const int64_t p = stages, v = virtual_stages, chunks = p * v;
  const std::string pipeline =
      "--pp " + std::to_string(p) + (v > 1 ? " x --virtual-stages " + std::to_string(v) : std::string());
  std::vector<int64_t> sizes(static_cast<size_t>(chunks), 0);  // by model order
  const bool by_stage = split.first_stage_layers != 0 || split.last_stage_layers != 0;
  const bool as_layers = split.embedding_as_layer || split.loss_as_layer;
  if (split.first_stage_layers < 0 || split.last_stage_layers < 0)
    return refuse(split.first_stage_layers < 0 ? "--first-stage-layers" : "--last-stage-layers", "must be 1 or more");
  // Each within the model's layers, so that the rest below cannot wrap (Python may pass any integer).
  if (split.first_stage_layers > layers || split.last_stage_layers > layers)
    return refuse(split.first_stage_layers > layers ? "--first-stage-layers" : "--last-stage-layers",
                  "is more than the model's " + std::to_string(layers) + " layers; give fewer");
  if (by_stage && as_layers)
    return refuse("--first-stage-layers / --last-stage-layers",
                  "Megatron sets the first and last stages' layers or counts the embedding and loss as layers, not both; "
                  "give one of them");
  if ((by_stage || as_layers) && p < 2)
    return refuse(by_stage ? "--first-stage-layers / --last-stage-layers" : "--embedding-as-layer / --loss-as-layer",
                  "shape the stages of a pipeline; give --pp 2 or more, or drop the option");
  if (by_stage) {
    // Megatron's num_layers_in_first/last_pipeline_stage: the stages not set share the rest evenly.
    const int64_t first = split.first_stage_layers, last = split.last_stage_layers;
    const int64_t others = p - (first > 0 ? 1 : 0) - (last > 0 ? 1 : 0);
    const int64_t rest = layers - first - last;
    if (rest < 0 || (others == 0 && rest != 0) || (others > 0 && (rest <= 0 || rest % others != 0)))
      return refuse("--first-stage-layers / --last-stage-layers",
                    "leave " + std::to_string(rest) + " of the " + std::to_string(layers) + " layers to " +
                        std::to_string(others) + " other stage(s), which must hold an equal share of 1 or more each");
    const int64_t share = others > 0 ? rest / others : 0;
    for (int64_t r = 0; r < p; ++r) {
      const int64_t stage_layers = r == 0 && first > 0 ? first : r == p - 1 && last > 0 ? last : share;
      if (stage_layers % v != 0)
        return refuse(pipeline, "stage " + std::to_string(r) + "'s " + std::to_string(stage_layers) +
                                    " layers do not split over its " + std::to_string(v) + " model chunks");
      for (int64_t c = 0; c < v; ++c) sizes[static_cast<size_t>(c * p + r)] = stage_layers / v;
    }
  } else {
    // Even, or the embedding and the loss each counted as a layer of the model's first and last chunk.
    const int64_t units = layers + (split.embedding_as_layer ? 1 : 0) + (split.loss_as_layer ? 1 : 0);
    if (units % chunks != 0)
      return refuse(pipeline, "must divide num_hidden_layers (" + std::to_string(layers) + ")" +
                                  (as_layers ? std::string(" with the embedding and loss counted as layers (") +
                                                   std::to_string(units) + ")"
                                             : std::string()) +
                                  ": every stage (and model chunk) holds the same number of layers; "
                                  "--first-stage-layers and --last-stage-layers make uneven ones");
    for (int64_t& size : sizes) size = units / chunks;
    if (split.embedding_as_layer) --sizes.front();
    if (split.loss_as_layer) --sizes.back();
  }
  std::vector<LayerRange> out;
  int64_t begin = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    if (sizes[g] < 1)
      return refuse(pipeline, "would leave stage " + std::to_string(static_cast<int64_t>(g) % p) + "'s chunk " +
                                  std::to_string(static_cast<int64_t>(g) / p) + " without a decoder layer; give fewer stages");
    out.push_back({begin, begin + sizes[g]});
    begin += sizes[g];
  }
  return out;
}

std::string split_name(const PipelineSplit& s) {
  if (s.first_stage_layers != 0 || s.last_stage_layers != 0) {
    std::string name;
    if (s.first_stage_layers != 0) name += "first stage " + std::to_string(s.first_stage_layers) + " layers";
    if (s.last_stage_layers != 0)
      name += (name.empty() ? "" : ", ") + std::string("last stage ") + std::to_string(s.last_stage_layers) + " layers";
    return name;
  }
  if (s.embedding_as_layer && s.loss_as_layer) return "embedding and loss as layers";
  if (s.embedding_as_layer) return "embedding as a layer";
  if (s.loss_as_layer) return "loss as a layer";
  return "even";
}

}  // namespace census
