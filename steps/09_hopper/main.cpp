// Step 09 program: the forward on Hopper's TMA, wgmma and warp specialisation (--dtype bf16 |
// fp16, --variant fa3 or a rung of the ladder). Run with --help for the options.
#include "common/driver.hpp"
#include "steps/09_hopper/hopper.hpp"

int main(int argc, char** argv) { return fs::step_main(fs::step09_info(), argc, argv); }
