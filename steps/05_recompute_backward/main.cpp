// Step 05 program: the recomputation backward. Run with --help for the options, e.g.
//   step05_recompute_backward --backward --check --dropout 0.1 --deterministic
#include "common/driver.hpp"
#include "steps/05_recompute_backward/backward.hpp"

int main(int argc, char** argv) { return fs::step_main(fs::step05_info(), argc, argv); }
