// Benchmark results as CSV rows: each --bench run can append one row per pass to a file,
// and docs/benchmarks/<gpu>.csv holds the committed rows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fs {

struct ResultRow {
  std::string gpu;      // "NVIDIA H200"
  std::string step;     // "01_naive", "04_online_softmax/fa2", "torch_math"
  std::string pass;     // "fwd" or "bwd"
  std::string dtype = "fp32";
  int B = 0, H = 0, N = 0, d = 0;
  bool causal = false;
  float dropout = 0.f;   // dropout probability of the run
  std::string mask;      // block-sparse pattern ("butterfly@0.25", "random:0.5", a file), empty: dense
  double density = 1;    // fraction of nonzero blocks
  double median_ms = 0;
  double tflops = 0;
  std::int64_t peak_mem_bytes = 0;
  std::int64_t hbm_bytes_model = 0;
  std::optional<double> max_err;  // empty when the run was not checked
};

// The header line, and one row in the same column order.
std::string csv_header();
std::string csv_line(const ResultRow& row);

// Appends `row` to `path`, writing the header first when the file is new or empty.
// Throws InputError when the file cannot be written.
void append_csv(const std::string& path, const ResultRow& row);

// The commit the program was built from ("a1b2c3d", "a1b2c3d-dirty"), or $FS_COMMIT when set.
std::string build_commit();
// Today's date, UTC, ISO 8601.
std::string today_utc();

}  // namespace fs
