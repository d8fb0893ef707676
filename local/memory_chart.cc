#include "local/memory_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

namespace headroom::local {

namespace {

constexpr double kWidth = 980, kHeight = 520;
constexpr double kLeft = 70, kRight = 200, kTop = 70, kBottom = 55;
const char* const kRankColors[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
                                   "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
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

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string Bytes(int64_t b) {
  char buf[32];
  if (b >= (1LL << 30)) std::snprintf(buf, sizeof buf, "%.3g GiB", b / double(1LL << 30));
  else std::snprintf(buf, sizeof buf, "%.3g MiB", b / double(1LL << 20));
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

std::string Pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g%%", v);
  return buf;
}

// Steps and percentages of the limit to canvas coordinates. The x axis runs to the
// job's last step (or the newest record beyond it), the y axis to the highest percentage
// seen plus a margin, rounded up to 10%.
struct Scale {
  double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  int64_t max_step = 1;
  double y_max = 100;
  bool any_gpu = false;  // some record has GPU memory: thresholds, lines and legend for it
  double X(double step) const { return kLeft + plot_w * step / static_cast<double>(max_step); }
  double Y(double pct) const { return kTop + plot_h * (1 - pct / y_max); }
};

double HostPct(const protocol::StepRecord& r, int64_t default_limit) {
  const int64_t limit = r.host_limit_bytes > 0 ? r.host_limit_bytes : default_limit;
  return limit > 0 ? 100.0 * r.host_bytes / limit : 0.0;
}

double GpuPct(const protocol::StepRecord& r) {
  return r.gpu_total_bytes > 0 ? 100.0 * r.gpu_reserved_bytes / r.gpu_total_bytes : 0.0;
}

Scale FitScale(const MemoryChartInput& in) {
  Scale s;
  s.max_step = std::max<int64_t>(in.total_steps, 1);
  double max_pct = 100;
  for (const auto& r : in.records) {
    s.max_step = std::max(s.max_step, r.step);
    max_pct = std::max(max_pct, HostPct(r, in.host_limit_bytes));
    if (r.gpu_total_bytes > 0) {
      s.any_gpu = true;
      max_pct = std::max(max_pct, GpuPct(r));
    }
  }
  s.y_max = std::ceil((max_pct + 5) / 10) * 10;
  return s;
}

void DrawTitle(std::ostream& svg, const MemoryChartInput& in) {
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" viewBox=\"0 0 " << kWidth << ' ' << kHeight
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kLeft << "\" y=\"26\" font-size=\"16\" font-weight=\"bold\">" << Escape(in.title)
      << "</text>\n"
      << "<text x=\"" << kLeft << "\" y=\"46\" fill=\"#555\">memory per worker as % of its limit"
      << (in.host_limit_bytes > 0 ? " (" + Bytes(in.host_limit_bytes) + " host)" : std::string())
      << "; a restarted worker starts a new line where it resumed</text>\n";
}

void DrawGridAndAxes(std::ostream& svg, const Scale& sc) {
  const double y_tick = NiceStep(sc.y_max, 6);
  for (double p = 0; p <= sc.y_max + 1e-9; p += y_tick) {
    svg << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + sc.plot_w << "\" y1=\"" << Num(sc.Y(p)) << "\" y2=\""
        << Num(sc.Y(p)) << "\" stroke=\"#e5e5e5\"/>\n"
        << "<text x=\"" << kLeft - 8 << "\" y=\"" << Num(sc.Y(p) + 4) << "\" text-anchor=\"end\">" << p << "%</text>\n";
  }
  const double x_tick = std::max(1.0, NiceStep(static_cast<double>(sc.max_step), 10));
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
      << ") rotate(-90)\" text-anchor=\"middle\">% of memory limit</text>\n";
}

void DrawLimitAndThresholds(std::ostream& svg, const Scale& sc, const MemoryChartInput& in) {
  auto hline = [&](double pct, const char* color, const char* dash, const std::string& label) {
    svg << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + sc.plot_w << "\" y1=\"" << Num(sc.Y(pct)) << "\" y2=\""
        << Num(sc.Y(pct)) << "\" stroke=\"" << color << "\" stroke-width=\"1.5\""
        << (dash[0] ? std::string(" stroke-dasharray=\"") + dash + "\"" : std::string()) << "/>\n"
        << "<text x=\"" << kLeft + sc.plot_w + 6 << "\" y=\"" << Num(sc.Y(pct) + 4) << "\" fill=\"" << color << "\">"
        << Escape(label) << "</text>\n";
  };
  hline(100, "#000", "", "limit 100%");
  hline(in.host_threshold * 100, "#d62728", "6 4", "host threshold " + Pct(in.host_threshold * 100));
  if (sc.any_gpu) hline(in.gpu_threshold * 100, "#ff7f0e", "6 4", "GPU threshold " + Pct(in.gpu_threshold * 100));
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

void DrawActions(std::ostream& svg, const Scale& sc, const std::vector<runtime::ActionRecord>& actions) {
  DrawActionMarks(
      svg, actions, [&](double step) { return sc.X(step); }, kTop, kTop + sc.plot_h);
}

// One polyline per (generation, rank) and resource; returns the ranks drawn.
std::set<int> DrawMemoryLines(std::ostream& svg, const Scale& sc, const MemoryChartInput& in) {
  auto point = [&](const protocol::StepRecord& r, double pct) {
    return Num(sc.X(static_cast<double>(r.step))) + ',' + Num(sc.Y(pct)) + ' ';
  };
  std::map<std::pair<int, int>, std::vector<const protocol::StepRecord*>> lines;
  for (const auto& r : in.records) lines[{r.generation, r.rank}].push_back(&r);
  std::set<int> ranks;
  for (const auto& [key, recs] : lines) {
    const int rank = key.second;
    ranks.insert(rank);
    const char* color = kRankColors[rank % 8];
    std::string host, gpu;
    for (const auto* r : recs) {
      host += point(*r, HostPct(*r, in.host_limit_bytes));
      if (r->gpu_total_bytes > 0) gpu += point(*r, GpuPct(*r));
    }
    svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"" << host
        << "\"><title>rank " << rank << ", generation " << key.first << ", host</title></polyline>\n";
    if (recs.size() == 1) {
      svg << "<circle cx=\"" << Num(sc.X(static_cast<double>(recs[0]->step))) << "\" cy=\""
          << Num(sc.Y(HostPct(*recs[0], in.host_limit_bytes))) << "\" r=\"2.5\" fill=\"" << color << "\"/>\n";
    }
    if (!gpu.empty()) {
      svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" stroke-dasharray=\"5 3\" points=\""
          << gpu << "\"><title>rank " << rank << ", generation " << key.first << ", GPU</title></polyline>\n";
    }
  }
  return ranks;
}

void DrawLegend(std::ostream& svg, const Scale& sc, const std::set<int>& ranks) {
  const double x = kLeft + sc.plot_w;
  double ly = kTop + sc.plot_h - 20.0 * (ranks.size() + (sc.any_gpu ? 2 : 1)) - 10;
  for (const int rank : ranks) {
    svg << "<line x1=\"" << x + 8 << "\" x2=\"" << x + 30 << "\" y1=\"" << ly << "\" y2=\"" << ly << "\" stroke=\""
        << kRankColors[rank % 8] << "\" stroke-width=\"2\"/>"
        << "<text x=\"" << x + 36 << "\" y=\"" << ly + 4 << "\">worker " << rank << " host</text>\n";
    ly += 20;
  }
  if (sc.any_gpu) {
    svg << "<line x1=\"" << x + 8 << "\" x2=\"" << x + 30 << "\" y1=\"" << ly << "\" y2=\"" << ly
        << "\" stroke=\"#333\" stroke-width=\"2\" stroke-dasharray=\"5 3\"/>"
        << "<text x=\"" << x + 36 << "\" y=\"" << ly + 4 << "\">dashed: GPU</text>\n";
    ly += 20;
  }
  svg << "<text x=\"" << x + 8 << "\" y=\"" << ly + 4 << "\" fill=\"#1f4e9c\">guard action</text>"
      << "<text x=\"" << x + 96 << "\" y=\"" << ly + 4 << "\" fill=\"#d62728\">OOM/crash</text>\n";
}

}  // namespace

std::string SvgEscape(const std::string& text) { return Escape(text); }

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
        << Escape("step " + std::to_string(a.step) + " " + runtime::ToWireName(a.type) + ": " + a.reason) << "</title>"
        << "<line x1=\"" << Num(x) << "\" x2=\"" << Num(x) << "\" y1=\"" << top << "\" y2=\"" << bottom
        << "\" stroke=\"" << color << "\" stroke-width=\"1.5\" stroke-dasharray=\"3 3\"/>"
        << "<text x=\"" << Num(x + 3) << "\" y=\"" << top + 14 + 14 * lane << "\" fill=\"" << color
        << "\" font-weight=\"bold\">" << Escape(label) << "</text></g>\n";
  }
}

std::string RenderMemoryChartSvg(const MemoryChartInput& in) {
  const Scale scale = FitScale(in);
  std::ostringstream svg;
  DrawTitle(svg, in);
  DrawGridAndAxes(svg, scale);
  DrawLimitAndThresholds(svg, scale, in);
  DrawActions(svg, scale, in.actions);
  const std::set<int> ranks = DrawMemoryLines(svg, scale, in);
  DrawLegend(svg, scale, ranks);
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace headroom::local
