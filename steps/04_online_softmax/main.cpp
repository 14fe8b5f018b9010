// Step 04 program: the FlashAttention forward (--variant alg1 | fa2). Run with --help for the options.
#include "common/driver.hpp"
#include "steps/04_online_softmax/flash.hpp"

int main(int argc, char** argv) { return fs::step_main(fs::step04_info(), argc, argv); }
