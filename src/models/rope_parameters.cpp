#include "models/rope_parameters.h"

namespace census {

Result<double> read_partial_rotary_factor(const ConfigReader& r, const nlohmann::json* rope, double fallback) {
  if (rope != nullptr && rope->is_object() && rope->contains("partial_rotary_factor") &&
      !rope->at("partial_rotary_factor").is_null()) {
    const nlohmann::json& factor = rope->at("partial_rotary_factor");
    if (!factor.is_number() || factor.get<double>() <= 0 || factor.get<double>() > 1)
      return refuse("partial_rotary_factor", "must be a number in (0, 1], not " + shown(factor) + "; fix the config");
    return factor.get<double>();
  }
  return r.positive_number("partial_rotary_factor", fallback);
}

Result<int64_t> rotary_width(int64_t head_dim, double factor) {
  // A share of head_dim: checked before the product is cast (1e45 * head_dim would not fit 64 bits).
  if (!(factor > 0 && factor <= 1))
    return refuse("partial_rotary_factor", "must be a number in (0, 1], not " + shown(factor) + "; fix the config");
  const auto width = static_cast<int64_t>(static_cast<double>(head_dim) * factor);
  if (width < 2 || width % 2 != 0)
    return refuse("partial_rotary_factor", "gives a rotary width of " + std::to_string(width) + " of head_dim " +
                                               std::to_string(head_dim) + "; it must be even and positive, fix the config");
  return width;
}

Status read_partial_rotary_dim(const ConfigReader& r, ModelConfig& c, double fallback) {
  const nlohmann::json* rope = r.has("rope_parameters") ? &r.json().at("rope_parameters") : nullptr;
  CENSUS_ASSIGN(const double factor, read_partial_rotary_factor(r, rope, fallback));
  CENSUS_ASSIGN(c.rotary_dim, rotary_width(c.head_dim, factor));
  return {};
}

}  // namespace census
