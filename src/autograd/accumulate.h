// File: accumulate.h
// Gradient accumulation into a leaf, as AccumulateGrad runs it (the node itself is graph data,
// graph/accumulate_grad.h). The first gradient is stolen into .grad when nothing else holds it and
// its layout obeys the leaf's; otherwise it is cloned; later ones are summed out of place. A leaf
// that is a parameter tells observers (the parameter's tensor hook) before, and runs the session's
// post-accumulate-grad hook after.
#pragma once

#include "graph/accumulate_grad.h"

namespace census {

void accumulate_grad(const AccumulateGrad& node, GradList& grads);

}  // namespace census
