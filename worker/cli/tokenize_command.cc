#include "worker/cli/tokenize_command.h"

#include <istream>
#include <ostream>
#include <sstream>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/files/bounded_line_reader.h"
#include "core/protocol/exit_codes.h"
#include "worker/cli/log_to_stream.h"
#include "worker/cli/parse_arguments.h"
#include "worker/tokenizer/hf_tokenizer.h"

namespace headroom::worker {
namespace {

// A line of input that cannot be used: exit 2.
class LineError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

nlohmann::json ParseLine(const std::string& line) {
  const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw LineError("not valid JSON");
  return j;
}

void EncodeLine(const HfTokenizer& tokenizer, const std::string& line, std::ostream& out) {
  const auto j = ParseLine(line);
  if (!j.is_string()) throw LineError("expected a JSON string (the text to encode)");
  std::vector<int64_t> ids;
  try {
    ids = tokenizer.Encode(j.get<std::string>());
  } catch (const TokenizerError& e) {
    throw LineError(e.what());
  }
  out << nlohmann::json(ids).dump() << "\n";
}

void DecodeLine(const HfTokenizer& tokenizer, const std::string& line, bool skip_special, std::ostream& out) {
  const auto j = ParseLine(line);
  if (!j.is_array()) throw LineError("expected a JSON array of token ids");
  std::vector<int64_t> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      throw LineError("expected a JSON array of token ids; " + v.dump() + " is not a non-negative integer");
    }
    ids.push_back(v.get<int64_t>());
  }
  std::string text;
  try {
    text = tokenizer.Decode(ids, skip_special);
  } catch (const TokenizerError& e) {
    throw LineError(e.what());
  }
  out << nlohmann::json(text).dump() << "\n";
}

}  // namespace

bool IsTokenizeCommand(const std::string& command) { return command == "tokenize"; }

int RunTokenizeCommand(int argc, const char* const* argv, std::istream& in, std::ostream& out, std::ostream& err,
                       size_t max_line_bytes) {
  std::string model;
  bool decode = false;
  bool skip_special = false;
  CLI::App app{"headroom-worker tokenize: a Hugging Face tokenizer.json on stdin, one JSON value per line"};
  app.name("headroom-worker tokenize");
  app.add_option("--model", model, "directory with tokenizer.json (tokenizer_config.json optional)")->required();
  app.add_flag("--decode", decode, "read arrays of ids and write strings, instead of the other way round");
  app.add_flag("--skip-special-tokens", skip_special, "with --decode: leave special tokens out of the text");
  if (const auto exit_code = ParseArguments(app, argc, argv, out, err)) return *exit_code;
  const LogToStream log_to_err(err);  // stdout holds only the results
  try {
    const HfTokenizer tokenizer = HfTokenizer::Load(model);
    // Line by line within a bound: a 1 GB "line" is refused after reading about the
    // limit of it, not read whole.
    files::BoundedLineReader lines(in, max_line_bytes);
    std::string line;
    for (;;) {
      int64_t number = lines.line_number() + 1;
      try {
        if (!lines.Next(line)) break;
        number = lines.line_number();
        if (decode) {
          DecodeLine(tokenizer, line, skip_special, out);
        } else {
          EncodeLine(tokenizer, line, out);
        }
      } catch (const std::invalid_argument& e) {  // LineError, files::LineTooLongError
        out.flush();
        err << "headroom-worker tokenize: line " << number << ": " << e.what() << "\n";
        return protocol::kExitInvalidSpec;
      }
    }
    out.flush();
    return protocol::kExitFinished;
  } catch (const TokenizerError& e) {
    err << "headroom-worker tokenize: " << e.what() << "\n";
    return protocol::kExitInvalidSpec;
  } catch (const std::exception& e) {
    err << "headroom-worker tokenize: " << e.what() << "\n";
    return protocol::kExitFailure;
  }
}

}  // namespace headroom::worker
