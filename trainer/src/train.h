// train.h: what mmtrain's main needs, without a LibTorch header (main.cc only parses flags).
#pragma once

#include "config.h"

namespace mm::train {

/// This process's rank as the launcher's environment says (0 when none); never throws.
int RankFromEnvironment();

/// Runs training (see trainer.h). Throws std::exception with a one-line message on any error.
void Train(const TrainConfig& config);

}  // namespace mm::train
