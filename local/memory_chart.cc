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

const char* const kRankColors[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
                                   "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
std::string Bytes(int64_t b) {
  char buf[32];
  if (b >= (1LL << 30)) std::snprintf(buf, sizeof buf, "%.3g GiB", b / double(1LL << 30));
  else std::snprintf(buf, sizeof buf, "%.3g MiB", b / double(1LL << 20));
  return buf;
}

std::string Pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g%%", v);
  return buf;
}

// Steps and percentages of the limit to canvas coordinates. The x axis runs to the
// job's last step (or the newest record beyond it), the y axis to the highest percentage
// seen plus a margin, rounded up to 10%.
struct Scale : StepAxis {
  double y_max = 100;
  bool any_gpu = false;  // some record has GPU memory: thresholds, lines and legend for it
  double Y(double pct) const { return kPlotTop + plot_h * (1 - pct / y_max); }
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
  BeginSvg(svg, in.title,
           "memory per worker as % of its limit" +
               (in.host_limit_bytes > 0 ? " (" + Bytes(in.host_limit_bytes) + " host)" : std::string()) +
               "; a restarted worker starts a new line where it resumed");
}

void DrawGridAndAxes(std::ostream& svg, const Scale& sc) {
  std::vector<std::pair<double, std::string>> ticks;
  const double y_tick = NiceStep(sc.y_max, 6);
  for (double p = 0; p <= sc.y_max + 1e-9; p += y_tick) {
    std::ostringstream label;
    label << p << '%';
    ticks.emplace_back(sc.Y(p), label.str());
  }
  DrawStepGrid(svg, sc, ticks, "% of memory limit");
}

void DrawLimitAndThresholds(std::ostream& svg, const Scale& sc, const MemoryChartInput& in) {
  auto hline = [&](double pct, const char* color, const char* dash, const std::string& label) {
    svg << "<line x1=\"" << kPlotLeft << "\" x2=\"" << kPlotLeft + sc.plot_w << "\" y1=\"" << SvgNum(sc.Y(pct))
        << "\" y2=\"" << SvgNum(sc.Y(pct)) << "\" stroke=\"" << color << "\" stroke-width=\"1.5\""
        << (dash[0] ? std::string(" stroke-dasharray=\"") + dash + "\"" : std::string()) << "/>\n"
        << "<text x=\"" << kPlotLeft + sc.plot_w + 6 << "\" y=\"" << SvgNum(sc.Y(pct) + 4) << "\" fill=\"" << color
        << "\">" << SvgEscape(label) << "</text>\n";
  };
  hline(100, "#000", "", "limit 100%");
  hline(in.host_threshold * 100, "#d62728", "6 4", "host threshold " + Pct(in.host_threshold * 100));
  if (sc.any_gpu) hline(in.gpu_threshold * 100, "#ff7f0e", "6 4", "GPU threshold " + Pct(in.gpu_threshold * 100));
}

void DrawActions(std::ostream& svg, const Scale& sc, const std::vector<runtime::ActionRecord>& actions) {
  DrawActionMarks(
      svg, actions, [&](double step) { return sc.X(step); }, kPlotTop, kPlotTop + sc.plot_h);
}

// One polyline per (generation, rank) and resource; returns the ranks drawn.
std::set<int> DrawMemoryLines(std::ostream& svg, const Scale& sc, const MemoryChartInput& in) {
  auto point = [&](const protocol::StepRecord& r, double pct) {
    return SvgNum(sc.X(static_cast<double>(r.step))) + ',' + SvgNum(sc.Y(pct)) + ' ';
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
      svg << "<circle cx=\"" << SvgNum(sc.X(static_cast<double>(recs[0]->step))) << "\" cy=\""
          << SvgNum(sc.Y(HostPct(*recs[0], in.host_limit_bytes))) << "\" r=\"2.5\" fill=\"" << color << "\"/>\n";
    }
    if (!gpu.empty()) {
      svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" stroke-dasharray=\"5 3\" points=\""
          << gpu << "\"><title>rank " << rank << ", generation " << key.first << ", GPU</title></polyline>\n";
    }
  }
  return ranks;
}

void DrawLegend(std::ostream& svg, const Scale& sc, const std::set<int>& ranks) {
  const double x = kPlotLeft + sc.plot_w;
  double ly = kPlotTop + sc.plot_h - 20.0 * (ranks.size() + (sc.any_gpu ? 2 : 1)) - 10;
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
