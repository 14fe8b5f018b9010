#include "visualizer/model/labels.hpp"

#include <cmath>
#include <cstdio>
#include <iterator>

#include "visualizer/model/replay.hpp"

namespace fs::viz {

namespace tr = fs::trace;

const char* tensor_label(tr::Tensor t) {
  static const char* const names[] = {"-",     "Q",     "K",      "V",       "O",  "LSE", "S",
                                       "P",     "dO",    "dQ",     "dK",      "dV", "dP",  "dS",
                                       "D",     "m",     "l",      "dQacc",   "order", "sort_key",
                                       "k_new", "v_new", "o_part", "lse_part"};
  static_assert(std::size(names) == tr::kTensorCount, "a name for every tensor");
  const int i = int(t);
  return i >= 0 && i < tr::kTensorCount ? names[i] : "?";
}

const char* kind_label(tr::Kind k) {
  static const char* const names[] = {
      "load",       "store",      "compute S",     "softmax",       "rescale",       "accumulate O",
      "compute dP", "compute dS", "accumulate dQ", "accumulate dK", "accumulate dV", "skip",
      "wait"};
  static_assert(std::size(names) == tr::kKindCount, "a name for every kind");
  const int i = int(k);
  return i >= 0 && i < tr::kKindCount ? names[i] : "?";
}

std::string tile_label(const tr::Event& e) {
  // An event on no tensor (a wait) has no tile to name: its rows are not a tensor's.
  if (e.tensor == tr::Tensor::None) return "";
  char buf[112];
  const bool square = score_like(e.tensor);
  if (square)
    std::snprintf(buf, sizeof buf, "%s[%d:%d, %d:%d)", tensor_label(e.tensor), e.row0, e.row0 + e.rows, e.col0,
                  e.col0 + e.cols);
  else if (e.col0 != 0)
    std::snprintf(buf, sizeof buf, "%s[%d:%d, %d:%d)", tensor_label(e.tensor), e.row0, e.row0 + e.rows, e.col0,
                  e.col0 + e.cols);
  else
    std::snprintf(buf, sizeof buf, "%s[%d:%d)", tensor_label(e.tensor), e.row0, e.row0 + e.rows);
  if (e.round < 0) return buf;
  return std::string(buf) + " · round " + std::to_string(e.round) + " slots";
}

std::string sample_row_label(const Replay& r, const tr::Event& e) {
  if (e.round < 0) return "row " + std::to_string(e.sample_row);
  const std::string slot = "slot " + std::to_string(e.sample_row) + " of round " + std::to_string(e.round);
  if (!r.placeable(tr::Tensor::Q, e.bh, e.round)) return slot;  // orders that place nothing
  return "row " + std::to_string(r.row_of_slot(tr::Tensor::Q, e.bh, e.round, e.sample_row)) + " (" + slot + ")";
}

std::string moved_element_type(const Replay& r, tr::Tensor t) {
  const int moved = r.moved_element_bytes(t);
  if (moved == element_bytes(r.meta(), t)) return "";
  if (moved == 1 && fp8_forward(r.meta())) return "e4m3";
  return std::to_string(moved) + "-byte";
}

std::string format_bytes(double b) {
  char buf[32];
  const double a = std::fabs(b);
  if (a >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (a >= 1024.0 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1024.0 * 1024));
  else if (a >= 1024.0)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

std::string format_ns(double ns) {
  char buf[32];
  const double a = std::fabs(ns);
  if (a >= 1e9)
    std::snprintf(buf, sizeof buf, "%.3f s", ns / 1e9);
  else if (a >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3f ms", ns / 1e6);
  else if (a >= 1e3)
    std::snprintf(buf, sizeof buf, "%.2f µs", ns / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  return buf;
}

std::string format_flops(double f) {
  char buf[32];
  if (f >= 1e12)
    std::snprintf(buf, sizeof buf, "%.2f TFLOP", f / 1e12);
  else if (f >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f GFLOP", f / 1e9);
  else if (f >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f MFLOP", f / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.0f FLOP", f);
  return buf;
}

std::string format_count(double n) {
  char buf[32];
  if (n >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f M", n / 1e6);
  else if (n >= 1e4)
    std::snprintf(buf, sizeof buf, "%.1f k", n / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", n);
  return buf;
}

}  // namespace fs::viz
