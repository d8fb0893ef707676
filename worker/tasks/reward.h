// The verifiable reward of one response against the expected answer.
//
// The target is the answer's tokens followed by EOS; the response is the generated
// tokens up to and including the first EOS (all of them when there is none).
//   1.0                     the response equals the target
//   0.5 * matches / width   otherwise: matches counts positions i where response[i] ==
//                           target[i] (the EOS position included), width = max(target
//                           length, response length), so extra or missing tokens cost
//                           credit
//   0.0                     nothing matches (an empty answer, garbage)
// Why the EOS position earns credit on its own: otherwise stopping at the right place is
// only ever rewarded together with every digit being right, and a model trained from
// scratch almost never sees that. Partial credit caps at 0.5 so an exact answer always
// beats a near miss by a clear margin.
#pragma once

#include <cstdint>
#include <string>

namespace headroom::worker {

// `response` points at the generated tokens (n of them; PAD after EOS is ignored).
double ScoreResponse(const std::string& answer, const int64_t* response, int64_t n);

}  // namespace headroom::worker
