// The base of a class that owns something that must not be owned twice (a mapping, a file
// descriptor, a lock, a thread's autocast state): copying it would release the resource
// twice, so copy construction and assignment are deleted once, here.
#pragma once

namespace headroom {

class NonCopyable {
 public:
  NonCopyable(const NonCopyable&) = delete;
  NonCopyable& operator=(const NonCopyable&) = delete;

 protected:
  NonCopyable() = default;
  ~NonCopyable() = default;
};

}  // namespace headroom
