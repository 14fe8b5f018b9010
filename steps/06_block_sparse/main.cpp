// Step 06 program: block-sparse FlashAttention. Run with --help for the options, e.g.
//   step06_block_sparse --seq 4096 --pattern butterfly --backward --check
//   step06_block_sparse --seq 1024 --mask blocks.npy --block 128
#include "common/driver.hpp"
#include "steps/06_block_sparse/block_sparse.hpp"

int main(int argc, char** argv) { return fs::step_main(fs::step06_info(), argc, argv); }
