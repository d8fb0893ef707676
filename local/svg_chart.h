// What the run's charts share (memory_chart.h, training_chart.h): one canvas, a title and a
// subtitle, a step axis with its grid, a value axis whose ticks each chart chooses, and the
// actions marked the same way on both, so the two pictures line up step for step.
//
// Plain SVG 1.1 written by hand: no dependencies, opens in any browser.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "operator/runtime/job_status.h"

namespace headroom::local {

// The canvas: the plot area sits inside these margins (the legend goes on the right).
inline constexpr double kSvgWidth = 980, kSvgHeight = 520;
inline constexpr double kPlotLeft = 70, kPlotRight = 200, kPlotTop = 70, kPlotBottom = 55;

// The plot area, and steps from 0 to max_step across it.
struct StepAxis {
  double plot_w = kSvgWidth - kPlotLeft - kPlotRight;
  double plot_h = kSvgHeight - kPlotTop - kPlotBottom;
  int64_t max_step = 1;
  double X(double step) const { return kPlotLeft + plot_w * step / static_cast<double>(max_step); }
};

// text with &, <, > and " escaped for SVG text and attributes.
std::string SvgEscape(const std::string& text);
// A coordinate with one decimal.
std::string SvgNum(double v);
// A round tick spacing (1, 2 or 5 times a power of ten) giving about `ticks` ticks over `range`.
double NiceStep(double range, int ticks);

// The document's opening, a white canvas, the title and a grey subtitle (both escaped).
void BeginSvg(std::ostream& svg, const std::string& title, const std::string& subtitle);
// Horizontal grid lines at each (y, label) of `value_ticks`, vertical ones at round steps
// labelled with the step, the plot's frame, and the axes' names ("step", `value_name`).
void DrawStepGrid(std::ostream& svg, const StepAxis& axis,
                  const std::vector<std::pair<double, std::string>>& value_ticks, const std::string& value_name);

// Every action as a dashed vertical line from y = top to y = bottom at x_of_step(step),
// labelled ("restart @40", "OOM kill in step 41") in lanes so neighbours do not overlap,
// repeats of one action at one step drawn once with their count; guard actions in blue,
// OOM kills and crashes in red.
void DrawActionMarks(std::ostream& svg, const std::vector<runtime::ActionRecord>& actions,
                     const std::function<double(double)>& x_of_step, double top, double bottom);

}  // namespace headroom::local
