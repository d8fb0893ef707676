#include "local/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace headroom::local {

namespace {

bool IsTrouble(runtime::ActionType type) { return runtime::IsUnplannedEnd(type) || type == runtime::ActionType::kFail; }

// A crash happens during the step after the last one completed: say which.
std::string ActionLabel(const runtime::ActionRecord& a) {
  switch (a.type) {
    case runtime::ActionType::kRestartAfterOOMKill: return "OOM kill in step " + std::to_string(a.step + 1);
    case runtime::ActionType::kRestartAfterGpuOOM: return "GPU OOM in step " + std::to_string(a.step + 1);
    case runtime::ActionType::kRestartAfterCrash: return "crash in step " + std::to_string(a.step + 1);
    default: return std::string(runtime::ToWireName(a.type)) + " @" + std::to_string(a.step);
  }
}

// One mark per run of the same action at the same step (a crash loop), with its count.
struct Mark {
  const runtime::ActionRecord* action;
  int count;
};

std::vector<Mark> GroupRepeats(const std::vector<runtime::ActionRecord>& actions) {
  std::vector<Mark> marks;
  for (const runtime::ActionRecord& a : actions) {
    if (!marks.empty() && marks.back().action->step == a.step && marks.back().action->type == a.type) {
      ++marks.back().count;
    } else {
      marks.push_back({&a, 1});
    }
  }
  return marks;
}

}  // namespace

std::string SvgEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string SvgNum(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

double NiceStep(double range, int ticks) {
  const double raw = range / ticks;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

void BeginSvg(std::ostream& svg, const std::string& title, const std::string& subtitle) {
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kSvgWidth << "\" height=\"" << kSvgHeight
      << "\" viewBox=\"0 0 " << kSvgWidth << ' ' << kSvgHeight
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kPlotLeft << "\" y=\"26\" font-size=\"16\" font-weight=\"bold\">" << SvgEscape(title)
      << "</text>\n"
      << "<text x=\"" << kPlotLeft << "\" y=\"46\" fill=\"#555\">" << SvgEscape(subtitle) << "</text>\n";
}

void DrawStepGrid(std::ostream& svg, const StepAxis& axis,
                  const std::vector<std::pair<double, std::string>>& value_ticks, const std::string& value_name) {
  for (const auto& [y, label] : value_ticks) {
    svg << "<line x1=\"" << kPlotLeft << "\" x2=\"" << kPlotLeft + axis.plot_w << "\" y1=\"" << SvgNum(y) << "\" y2=\""
        << SvgNum(y) << "\" stroke=\"#e5e5e5\"/>\n"
        << "<text x=\"" << kPlotLeft - 8 << "\" y=\"" << SvgNum(y + 4) << "\" text-anchor=\"end\">" << SvgEscape(label)
        << "</text>\n";
  }
  const double step_tick = std::max(1.0, NiceStep(static_cast<double>(axis.max_step), 10));
  for (double s = 0; s <= axis.max_step + 1e-9; s += step_tick) {
    svg << "<line x1=\"" << SvgNum(axis.X(s)) << "\" x2=\"" << SvgNum(axis.X(s)) << "\" y1=\"" << kPlotTop << "\" y2=\""
        << kPlotTop + axis.plot_h << "\" stroke=\"#f0f0f0\"/>\n"
        << "<text x=\"" << SvgNum(axis.X(s)) << "\" y=\"" << kPlotTop + axis.plot_h + 18 << "\" text-anchor=\"middle\">"
        << s << "</text>\n";
  }
  svg << "<rect x=\"" << kPlotLeft << "\" y=\"" << kPlotTop << "\" width=\"" << axis.plot_w << "\" height=\""
      << axis.plot_h << "\" fill=\"none\" stroke=\"#888\"/>\n"
      << "<text x=\"" << kPlotLeft + axis.plot_w / 2 << "\" y=\"" << kSvgHeight - 12
      << "\" text-anchor=\"middle\">step</text>\n"
      << "<text transform=\"translate(18," << kPlotTop + axis.plot_h / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
      << SvgEscape(value_name) << "</text>\n";
}

// Vertical lines, labels stacked in lanes so neighbours do not overlap.
void DrawActionMarks(std::ostream& svg, const std::vector<runtime::ActionRecord>& actions,
                     const std::function<double(double)>& x_of_step, double top, double bottom) {
  double last_x = -1e9;
  int lane = 0;
  for (const Mark& m : GroupRepeats(actions)) {
    const runtime::ActionRecord& a = *m.action;
    const double x = x_of_step(static_cast<double>(a.step));
    lane = (x - last_x < 110) ? std::min(lane + 1, 5) : 0;
    last_x = x;
    const char* color = IsTrouble(a.type) ? "#d62728" : "#1f4e9c";
    const std::string label = ActionLabel(a) + (m.count > 1 ? " (x" + std::to_string(m.count) + ")" : "");
    svg << "<g><title>"
        << SvgEscape("step " + std::to_string(a.step) + " " + runtime::ToWireName(a.type) + ": " + a.reason)
        << "</title>"
        << "<line x1=\"" << SvgNum(x) << "\" x2=\"" << SvgNum(x) << "\" y1=\"" << top << "\" y2=\"" << bottom
        << "\" stroke=\"" << color << "\" stroke-width=\"1.5\" stroke-dasharray=\"3 3\"/>"
        << "<text x=\"" << SvgNum(x + 3) << "\" y=\"" << top + 14 + 14 * lane << "\" fill=\"" << color
        << "\" font-weight=\"bold\">" << SvgEscape(label) << "</text></g>\n";
  }
}

}  // namespace headroom::local
