// What a step program reports, and with which exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace fs {

// Exit codes of every step program (and the tour).
enum ExitCode : int {
  kExitOk = 0,
  kExitCheckFailed = 1,  // a check against the reference failed (or an unexpected CUDA error or
                         // exception: one line, never an abort)
  kExitBadInput = 2,     // bad options, sizes, input files or output paths; a write that fails;
                         // more host memory than is available
  kExitNoGpu = 3,        // no usable GPU, or not enough GPU memory for this problem
};

// Bad input from the user: the message is one line that says what is wrong and, where it
// helps, what to do instead. Shown as is, with exit code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The problem does not fit the GPU: shown as is, with exit code 3.
class ResourceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace fs
