// A TP group of one for tests that build a model without MPI (parallel/solo_comm.h).
#pragma once
#include "parallel/solo_comm.h"

namespace qmpi::testing {

using qmpi::SoloComm;

}  // namespace qmpi::testing
