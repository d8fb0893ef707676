// headroom-worker's tokenize command: a Hugging Face tokenizer (worker/tokenizer/) run on
// text from stdin, to check it against `tokenizers` or to prepare prompts by hand.
//
//   headroom-worker tokenize --model DIR
//       reads one JSON string per line, writes one JSON array of token ids per line
//       (no special tokens added; special tokens written in the text are recognised).
//   headroom-worker tokenize --model DIR --decode [--skip-special-tokens]
//       reads one JSON array of ids per line, writes one JSON string per line.
//
// Exit codes (core/protocol/exit_codes.h): 0; 2 when DIR/tokenizer.json cannot be used (the
// file and field named) or a line is not what it should be ("line N: ..."); 1 anything else.
#pragma once

#include <iosfwd>
#include <string>

namespace headroom::worker {

bool IsTokenizeCommand(const std::string& command);

// argv[0] is `tokenize`, then its options. Reads `in`, writes results to `out` and errors
// to `err`; returns the exit code.
int RunTokenizeCommand(int argc, const char* const* argv, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace headroom::worker
