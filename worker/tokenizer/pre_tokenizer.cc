#include "worker/tokenizer/pre_tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "worker/tokenizer/byte_level.h"
#include "worker/tokenizer/hf_tokenizer.h"

namespace headroom::worker {
namespace {

// GPT-2's pattern, which ByteLevel applies when use_regex is true.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

bool BoolField(const nlohmann::json& spec, const char* name, bool fallback, const std::string& where) {
  if (!spec.contains(name) || spec[name].is_null()) return fallback;
  if (!spec[name].is_boolean()) throw TokenizerError(where + "." + name + ": expected true or false");
  return spec[name].get<bool>();
}

}  // namespace

PreTokenizer PreTokenizer::FromJson(const nlohmann::json& spec, const std::string& where) {
  PreTokenizer p;
  if (!spec.is_null()) AddSteps(spec, where, p.steps_);
  return p;
}

void PreTokenizer::AddSteps(const nlohmann::json& spec, const std::string& where, std::vector<Step>& steps) {
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    throw TokenizerError(where + ": expected an object with a string \"type\"");
  }
  const std::string type = spec["type"].get<std::string>();
  if (type == "Sequence") {
    if (!spec.contains("pretokenizers") || !spec["pretokenizers"].is_array()) {
      throw TokenizerError(where + ".pretokenizers: expected a list");
    }
    for (std::size_t i = 0; i < spec["pretokenizers"].size(); ++i) {
      AddSteps(spec["pretokenizers"][i], where + ".pretokenizers[" + std::to_string(i) + "]", steps);
    }
    return;
  }
  Step step;
  if (type == "ByteLevel") {
    step.byte_level = true;
    step.add_prefix_space = BoolField(spec, "add_prefix_space", true, where);
    if (BoolField(spec, "use_regex", true, where)) step.regex.emplace_back(kGpt2Pattern, false, where);
  } else if (type == "Split") {
    const std::string pattern_where = where + ".pattern";
    if (!spec.contains("pattern") || !spec["pattern"].is_object() || spec["pattern"].size() != 1) {
      throw TokenizerError(pattern_where + ": expected {\"Regex\": ...} or {\"String\": ...}");
    }
    const auto entry = spec["pattern"].begin();
    const std::string kind = entry.key();
    const nlohmann::json& value = entry.value();
    if ((kind != "Regex" && kind != "String") || !value.is_string()) {
      throw TokenizerError(pattern_where + ": expected {\"Regex\": ...} or {\"String\": ...}");
    }
    step.regex.emplace_back(value.get<std::string>(), kind == "String", pattern_where + "." + kind);
    step.invert = BoolField(spec, "invert", false, where);
    if (!spec.contains("behavior") || !spec["behavior"].is_string()) {
      throw TokenizerError(where + ".behavior: expected a string");
    }
    const std::string behavior = spec["behavior"].get<std::string>();
    if (behavior == "Removed") {
      step.behavior = Behavior::kRemoved;
    } else if (behavior == "Isolated") {
      step.behavior = Behavior::kIsolated;
    } else if (behavior == "MergedWithPrevious") {
      step.behavior = Behavior::kMergedWithPrevious;
    } else if (behavior == "MergedWithNext") {
      step.behavior = Behavior::kMergedWithNext;
    } else if (behavior == "Contiguous") {
      step.behavior = Behavior::kContiguous;
    } else {
      throw TokenizerError(where + ".behavior: \"" + behavior + "\" is not a split behaviour");
    }
  } else {
    throw TokenizerError(where + ".type: pre-tokenizer \"" + type +
                         "\" is not supported (supported: Split, ByteLevel, Sequence, null)");
  }
  steps.push_back(std::move(step));
}

void PreTokenizer::SplitPiece(const Step& step, std::string_view piece, std::vector<std::string>& out) {
  std::string prefixed;
  if (step.byte_level && step.add_prefix_space && (piece.empty() || piece.front() != ' ')) {
    prefixed = " " + std::string(piece);
    piece = prefixed;
  }
  if (step.regex.empty()) {
    if (!piece.empty()) out.push_back(step.byte_level ? byte_level::Encode(piece) : std::string(piece));
    return;
  }
  // Every stretch of `piece` in order, each marked match or not.
  struct Span {
    std::size_t start, end;
    bool match;
  };
  std::vector<Span> spans;
  std::size_t previous = 0;
  for (const auto& [start, end] : step.regex.front().FindAll(piece)) {
    if (previous != start) spans.push_back({previous, start, false});
    spans.push_back({start, end, true});
    previous = end;
  }
  if (previous != piece.size()) spans.push_back({previous, piece.size(), false});
  if (step.invert) {
    for (Span& s : spans) s.match = !s.match;
  }
  // Which spans to keep and which to glue together, per the behaviour.
  std::vector<Span> kept;
  bool previous_match = false;
  switch (step.behavior) {
    case Behavior::kIsolated: kept = spans; break;
    case Behavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.match) kept.push_back(s);
      }
      break;
    case Behavior::kContiguous:
    case Behavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        // Contiguous glues a span to an equal neighbour; MergedWithPrevious glues a match
        // to the non-match before it.
        const bool glue =
            step.behavior == Behavior::kContiguous ? s.match == previous_match : s.match && !previous_match;
        if (!kept.empty() && glue) {
          kept.back().end = s.end;
        } else {
          kept.push_back(s);
        }
        previous_match = s.match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (!kept.empty() && it->match && !previous_match) {
          kept.back().start = it->start;
        } else {
          kept.push_back(*it);
        }
        previous_match = it->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const Span& s : kept) {
    if (s.end == s.start) continue;
    const std::string_view word = piece.substr(s.start, s.end - s.start);
    out.push_back(step.byte_level ? byte_level::Encode(word) : std::string(word));
  }
}

std::vector<std::string> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string> pieces;
  if (text.empty()) return pieces;
  pieces.emplace_back(text);
  for (const Step& step : steps_) {
    std::vector<std::string> next;
    next.reserve(pieces.size() * 2);
    for (const std::string& piece : pieces) SplitPiece(step, piece, next);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace headroom::worker
