// A fixture of the layering check: the allocator simulator may not know tensors.
#pragma once
#include "tensor/tensor.h"
