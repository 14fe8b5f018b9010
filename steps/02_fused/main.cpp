// Step 02 program: fused scores + mask + softmax; only P in HBM. Run with --help for the options.
#include "common/driver.hpp"
#include "steps/02_fused/fused.hpp"

int main(int argc, char** argv) { return fs::step_main(fs::step02_info(), argc, argv); }
