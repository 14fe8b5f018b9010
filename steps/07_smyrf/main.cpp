// Step 07 program: SMYRF, attention inside asymmetric-LSH clusters. Run with --help for the
// options, e.g.
//   step07_smyrf --seq 4096 --hashes 8 --cluster 32 --backward --check
//   step07_smyrf --load in/ --save in/      (q, k, v .npy in; o, lse and the clusters out: q_order.npy, ...)
//   step07_smyrf --load in/ --check         (the same inputs with the clusters saved beside them)
#include "common/driver.hpp"
#include "steps/07_smyrf/smyrf.hpp"

int main(int argc, char** argv) { return fs::step_main(fs::step07_info(), argc, argv); }
