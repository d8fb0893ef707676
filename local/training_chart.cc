#include "local/training_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "core/base/human_bytes.h"
#include "local/svg_chart.h"

namespace headroom::local {

namespace {

constexpr const char* kRewardColor = "#1f77b4";
constexpr const char* kAccuracyColor = "#d95f02";

// Steps across, fractions from 0 to 1 up.
struct Scale : StepAxis {
  double Y(double fraction) const { return kPlotTop + plot_h * (1 - std::clamp(fraction, 0.0, 1.0)); }
};

void DrawFrame(std::ostream& svg, const Scale& sc, const std::string& title) {
  BeginSvg(svg, title,
           "mean reward of each step's rollouts, and the share of held-out problems answered exactly right "
           "(greedy) at each evaluation");
  std::vector<std::pair<double, std::string>> ticks;
  for (int p = 0; p <= 100; p += 20) ticks.emplace_back(sc.Y(p / 100.0), std::to_string(p) + "%");
  DrawStepGrid(svg, sc, ticks, "reward, accuracy");
}

// Rank 0's reward, one polyline per generation.
void DrawRewards(std::ostream& svg, const Scale& sc, const std::vector<protocol::StepRecord>& records) {
  std::map<int, std::string> lines;
  for (const protocol::StepRecord& r : records) {
    if (r.rank != 0) continue;
    lines[r.generation] += SvgNum(sc.X(static_cast<double>(r.step))) + ',' + SvgNum(sc.Y(r.reward_mean)) + ' ';
  }
  for (const auto& [generation, points] : lines) {
    svg << "<polyline fill=\"none\" stroke=\"" << kRewardColor << "\" stroke-width=\"1.5\" points=\"" << points
        << "\"><title>reward, generation " << generation << "</title></polyline>\n";
  }
}

void DrawAccuracy(std::ostream& svg, const Scale& sc, const std::vector<std::pair<int64_t, double>>& points) {
  if (points.empty()) return;
  std::string line;
  for (const auto& [step, acc] : points)
    line += SvgNum(sc.X(static_cast<double>(step))) + ',' + SvgNum(sc.Y(acc)) + ' ';
  svg << "<polyline fill=\"none\" stroke=\"" << kAccuracyColor << "\" stroke-width=\"2.5\" points=\"" << line
      << "\"/>\n";
  for (const auto& [step, acc] : points) {
    const double x = sc.X(static_cast<double>(step)), y = sc.Y(acc);
    svg << "<g><title>" << SvgEscape("held-out accuracy " + Percent(acc, 1) + " at step " + std::to_string(step))
        << "</title><circle cx=\"" << SvgNum(x) << "\" cy=\"" << SvgNum(y) << "\" r=\"4.5\" fill=\"" << kAccuracyColor
        << "\"/><text x=\"" << SvgNum(x + (step == 0 ? 6 : -6)) << "\" y=\"" << SvgNum(y - 9) << "\" text-anchor=\""
        << (step == 0 ? "start" : "end") << "\" fill=\"" << kAccuracyColor << "\" font-weight=\"bold\">"
        << Percent(acc, 1) << "</text></g>\n";
  }
}

void DrawLegend(std::ostream& svg, const Scale& sc, bool any_accuracy) {
  const double x = kPlotLeft + sc.plot_w;
  double y = kPlotTop + 20;
  svg << "<line x1=\"" << x + 8 << "\" x2=\"" << x + 30 << "\" y1=\"" << y << "\" y2=\"" << y << "\" stroke=\""
      << kRewardColor << "\" stroke-width=\"1.5\"/><text x=\"" << x + 36 << "\" y=\"" << y + 4
      << "\">reward (rank 0)</text>\n";
  y += 20;
  if (any_accuracy) {
    svg << "<line x1=\"" << x + 8 << "\" x2=\"" << x + 30 << "\" y1=\"" << y << "\" y2=\"" << y << "\" stroke=\""
        << kAccuracyColor << "\" stroke-width=\"2.5\"/><circle cx=\"" << x + 19 << "\" cy=\"" << y
        << "\" r=\"4.5\" fill=\"" << kAccuracyColor << "\"/><text x=\"" << x + 36 << "\" y=\"" << y + 4
        << "\">held-out accuracy</text>\n";
  } else {
    svg << "<text x=\"" << x + 8 << "\" y=\"" << y + 4 << "\" fill=\"#555\">no held-out set</text>\n";
  }
  y += 20;
  svg << "<text x=\"" << x + 8 << "\" y=\"" << y + 4 << "\" fill=\"#1f4e9c\">guard action</text>"
      << "<text x=\"" << x + 96 << "\" y=\"" << y + 4 << "\" fill=\"#d62728\">OOM/crash</text>\n";
}

}  // namespace

std::vector<std::pair<int64_t, double>> HeldOutAccuracyByStep(const std::vector<protocol::StepRecord>& records) {
  std::map<int64_t, double> by_step;
  for (const protocol::StepRecord& r : records) {
    if (r.rank != 0) continue;
    if (r.heldout_accuracy_before >= 0) by_step[0] = r.heldout_accuracy_before;
    if (r.heldout_accuracy >= 0) by_step[r.step] = r.heldout_accuracy;
  }
  return {by_step.begin(), by_step.end()};
}

std::string RenderTrainingChartSvg(const TrainingChartInput& in) {
  Scale sc;
  sc.max_step = std::max<int64_t>(in.total_steps, 1);
  for (const protocol::StepRecord& r : in.records) sc.max_step = std::max(sc.max_step, r.step);
  const std::vector<std::pair<int64_t, double>> accuracy = HeldOutAccuracyByStep(in.records);
  std::ostringstream svg;
  DrawFrame(svg, sc, in.title);
  DrawActionMarks(
      svg, in.actions, [&](double step) { return sc.X(step); }, kPlotTop, kPlotTop + sc.plot_h);
  DrawRewards(svg, sc, in.records);
  DrawAccuracy(svg, sc, accuracy);
  DrawLegend(svg, sc, !accuracy.empty());
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace headroom::local
