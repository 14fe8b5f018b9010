// Step 08 program: the FlashAttention-2 forward on tensor cores (--dtype bf16 | fp16, --variant
// fa2 or a rung of the ladder). Run with --help for the options.
#include "common/driver.hpp"
#include "steps/08_tensor_cores/tensor_cores.hpp"

int main(int argc, char** argv) { return fs::step_main(fs::step08_info(), argc, argv); }
