// A file above the ops including from the ops: allowed.
#pragma once
#include "ops/dispatch.h"
