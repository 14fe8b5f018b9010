// Step 03 program: tiled attention, two passes over K. Run with --help for the options.
#include "common/driver.hpp"
#include "steps/03_tiled/tiled.hpp"

int main(int argc, char** argv) { return fs::step_main(fs::step03_info(), argc, argv); }
