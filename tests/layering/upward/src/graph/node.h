// A file below the ops including only from below it.
#pragma once
#include "tensor/tensor.h"
