// Step 01 program: standard attention with S and P in HBM. Run with --help for the options.
#include "common/driver.hpp"
#include "steps/01_naive/naive.hpp"

int main(int argc, char** argv) { return fs::step_main(fs::step01_info(), argc, argv); }
