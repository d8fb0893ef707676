// The one error every part of the checkpoint format throws: a file that cannot be written
// or read, a manifest that does not parse, a step that fails its checks. The message names
// the file (and the field or tensor) at fault.
#pragma once

#include <stdexcept>

namespace headroom::checkpoint {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace headroom::checkpoint
