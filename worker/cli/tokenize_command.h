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
// file and field named) or a line is not what it should be ("line N: ..."), a line longer
// than files::kMaxInputLineBytes among them (refused unread beyond that, so memory stays
// bounded whatever the input); 1 anything else. Log lines go to stderr, never stdout.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>

#include "core/files/bounded_line_reader.h"

namespace headroom::worker {

bool IsTokenizeCommand(const std::string& command);

// argv[0] is `tokenize`, then its options. Reads `in`, writes results to `out` and errors
// to `err`; returns the exit code. max_line_bytes: the longest input line (tests lower it).
int RunTokenizeCommand(int argc, const char* const* argv, std::istream& in, std::ostream& out, std::ostream& err,
                       size_t max_line_bytes = files::kMaxInputLineBytes);

}  // namespace headroom::worker
