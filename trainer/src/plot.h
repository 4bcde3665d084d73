// plot.h: `mmtrain plot`: training curves of RUN/metrics.jsonl as a PNG, drawn by matplotlib
// (Debian's python3-matplotlib) from a script compiled into mmtrain (plot.py). No LibTorch.
#pragma once

#include <string>
#include <vector>

namespace mm::train {

/// Draws one run, or two overlaid, to `png`: loss and its parts, learning rate, val caption
/// loss, val recall@k with chance, samples/s and data-wait %, against the step. Runs
/// $MM_PYTHON, else /usr/bin/python3 when it exists, else python3 from PATH, with the script
/// on its stdin. A last line of metrics.jsonl cut short by a kill is skipped, with a note on
/// stderr ("mmtrain plot: note: ..."). Returns "" on success, else one line saying what failed.
std::string PlotRuns(const std::vector<std::string>& runs, const std::string& png);

}  // namespace mm::train
