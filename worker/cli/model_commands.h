// headroom-worker's model inspection commands (docs/design.md, Real models and tasks): what a
// user runs to check the port of a Hugging Face model against transformers, with no job,
// rendezvous or checkpoint.
//
//   headroom-worker logits --model DIR --ids 1,5,9 [--device cuda]
//       one JSON array per position: the fp32 logits (shortest round-trip decimals; null
//       for a non-finite one, which JSON cannot write).
//   headroom-worker generate --model DIR --ids 1,5,9 --max-new-tokens N [--device cuda]
//       one JSON array: the prompt ids, then up to N greedy ids (KV-cached decoding). Like
//       transformers' generate, it stops after an end-of-sequence id: generation_config.json's
//       eos_token_id, else config.json's (a number or a list).
//
// Exit codes (core/protocol/exit_codes.h): 0; 2 when the model directory or the arguments
// cannot be used (an unsupported architecture, dtype or field, a missing tensor, a token id
// outside the vocabulary, a weight that is NaN or infinite), the message naming the file and
// the field or tensor; 1 anything else. stdout holds only the result: log lines (a
// warning about tensors the model does not use) go to stderr.
#pragma once

#include <iosfwd>
#include <string>

namespace headroom::worker {

// True when `command` (argv[1]) is one of the commands above.
bool IsModelCommand(const std::string& command);

// argv[0] is the command's name (`logits` or `generate`), then its options. Writes the
// result to `out` and errors to `err`; returns the exit code.
int RunModelCommand(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace headroom::worker
