#include "local/training_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "local/memory_chart.h"

namespace headroom::local {

namespace {

constexpr double kWidth = 980, kHeight = 520;
constexpr double kLeft = 70, kRight = 200, kTop = 70, kBottom = 55;
constexpr const char* kRewardColor = "#1f77b4";
constexpr const char* kAccuracyColor = "#d95f02";

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string Percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * fraction);
  return buf;
}

struct Scale {
  double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  int64_t max_step = 1;
  double X(double step) const { return kLeft + plot_w * step / static_cast<double>(max_step); }
  double Y(double fraction) const { return kTop + plot_h * (1 - std::clamp(fraction, 0.0, 1.0)); }
};

void DrawFrame(std::ostream& svg, const Scale& sc, const std::string& title) {
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" viewBox=\"0 0 " << kWidth << ' ' << kHeight
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kLeft << "\" y=\"26\" font-size=\"16\" font-weight=\"bold\">" << SvgEscape(title)
      << "</text>\n"
      << "<text x=\"" << kLeft
      << "\" y=\"46\" fill=\"#555\">mean reward of each step's rollouts, and the share of "
         "held-out problems answered exactly right (greedy) at each evaluation</text>\n";
  for (int p = 0; p <= 100; p += 20) {
    svg << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + sc.plot_w << "\" y1=\"" << Num(sc.Y(p / 100.0)) << "\" y2=\""
        << Num(sc.Y(p / 100.0)) << "\" stroke=\"#e5e5e5\"/>\n"
        << "<text x=\"" << kLeft - 8 << "\" y=\"" << Num(sc.Y(p / 100.0) + 4) << "\" text-anchor=\"end\">" << p
        << "%</text>\n";
  }
  const double raw = static_cast<double>(sc.max_step) / 10;
  const double mag = std::pow(10, std::floor(std::log10(std::max(raw, 1.0))));
  double x_tick = 10 * mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      x_tick = m * mag;
      break;
    }
  }
  x_tick = std::max(1.0, x_tick);
  for (double s = 0; s <= sc.max_step + 1e-9; s += x_tick) {
    svg << "<line x1=\"" << Num(sc.X(s)) << "\" x2=\"" << Num(sc.X(s)) << "\" y1=\"" << kTop << "\" y2=\""
        << kTop + sc.plot_h << "\" stroke=\"#f0f0f0\"/>\n"
        << "<text x=\"" << Num(sc.X(s)) << "\" y=\"" << kTop + sc.plot_h + 18 << "\" text-anchor=\"middle\">" << s
        << "</text>\n";
  }
  svg << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << sc.plot_w << "\" height=\"" << sc.plot_h
      << "\" fill=\"none\" stroke=\"#888\"/>\n"
      << "<text x=\"" << kLeft + sc.plot_w / 2 << "\" y=\"" << kHeight - 12 << "\" text-anchor=\"middle\">step</text>\n"
      << "<text transform=\"translate(18," << kTop + sc.plot_h / 2
      << ") rotate(-90)\" text-anchor=\"middle\">reward, accuracy</text>\n";
}

// Rank 0's reward, one polyline per generation.
void DrawRewards(std::ostream& svg, const Scale& sc, const std::vector<protocol::StepRecord>& records) {
  std::map<int, std::string> lines;
  for (const protocol::StepRecord& r : records) {
    if (r.rank != 0) continue;
    lines[r.generation] += Num(sc.X(static_cast<double>(r.step))) + ',' + Num(sc.Y(r.reward_mean)) + ' ';
  }
  for (const auto& [generation, points] : lines) {
    svg << "<polyline fill=\"none\" stroke=\"" << kRewardColor << "\" stroke-width=\"1.5\" points=\"" << points
        << "\"><title>reward, generation " << generation << "</title></polyline>\n";
  }
}

void DrawAccuracy(std::ostream& svg, const Scale& sc, const std::vector<std::pair<int64_t, double>>& points) {
  if (points.empty()) return;
  std::string line;
  for (const auto& [step, acc] : points) line += Num(sc.X(static_cast<double>(step))) + ',' + Num(sc.Y(acc)) + ' ';
  svg << "<polyline fill=\"none\" stroke=\"" << kAccuracyColor << "\" stroke-width=\"2.5\" points=\"" << line
      << "\"/>\n";
  for (const auto& [step, acc] : points) {
    const double x = sc.X(static_cast<double>(step)), y = sc.Y(acc);
    svg << "<g><title>" << SvgEscape("held-out accuracy " + Percent(acc) + " at step " + std::to_string(step))
        << "</title><circle cx=\"" << Num(x) << "\" cy=\"" << Num(y) << "\" r=\"4.5\" fill=\"" << kAccuracyColor
        << "\"/><text x=\"" << Num(x + (step == 0 ? 6 : -6)) << "\" y=\"" << Num(y - 9) << "\" text-anchor=\""
        << (step == 0 ? "start" : "end") << "\" fill=\"" << kAccuracyColor << "\" font-weight=\"bold\">" << Percent(acc)
        << "</text></g>\n";
  }
}

void DrawLegend(std::ostream& svg, const Scale& sc, bool any_accuracy) {
  const double x = kLeft + sc.plot_w;
  double y = kTop + 20;
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
      svg, in.actions, [&](double step) { return sc.X(step); }, kTop, kTop + sc.plot_h);
  DrawRewards(svg, sc, in.records);
  DrawAccuracy(svg, sc, accuracy);
  DrawLegend(svg, sc, !accuracy.empty());
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace headroom::local
