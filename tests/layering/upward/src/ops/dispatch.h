// An op file including from autograd/, a folder above ops/: the check must refuse it.
#pragma once
#include "graph/node.h"
#include "autograd/engine.h"
