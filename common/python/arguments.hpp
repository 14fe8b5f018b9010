// The Python module's argument layer, in plain C++: every tensor and keyword a call of the module
// hands over, checked before anything is read or computed, and the reference's problem built from
// them. pybind11 stays in the module's two halves (flashsteps.cpp, flashsteps_gpu.cpp), which turn
// Python objects into these arguments and an ArgError into ValueError or TypeError; this layer is
// what tests/fuzz/fuzz_python_args.cpp drives directly.
//
// What is refused, each in one line: a tensor of the wrong rank, a dimension below 1 (K/V of zero
// heads divided H by 0) or past int, K/V heads that do not divide the query heads, dtypes other
// than float32, float16 and bfloat16 (and one for q, k and v), strides whose reach overflows, a
// NaN or an infinity in an input (the command line's --load refuses them too: the reference would
// give O = 0 and LSE = −inf for the row, and check() call that agreement), a problem whose
// reference is past kMaxReferenceWork multiply-adds or past the memory available, keywords out of
// range (dropout_p, softmax_scale, softcap, window_size, seed: NaN and infinities included), ALiBi
// slopes that are not finite floats of shape (heads) or (batch, heads) (with cu_seqlens, batch is
// the number of sequences), cu_seqlens that are not prefix sums of the tokens.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "common/problem.hpp"
#include "common/reference.hpp"

namespace fs::python {

// A refused argument: raised as ValueError (Value) or TypeError (Type), its message one line.
class ArgError : public std::runtime_error {
 public:
  enum Kind { Value, Type };
  ArgError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};
[[noreturn]] void value_error(const std::string& what);
[[noreturn]] void type_error(const std::string& what);

// A tensor of a call, by name, over its DLPack description (which its owner keeps alive: the
// module's Borrowed, or the fuzz target's buffers).
class TensorArg {
 public:
  TensorArg() = default;
  TensorArg(const DLTensor& t, const char* name) : t_(&t), name_(name) {}

  const DLTensor& t() const { return *t_; }
  int ndim() const { return t_->ndim; }
  std::int64_t dim(int i) const { return t_->shape[i]; }
  // Stride of dimension i in elements (row-major when the producer gives none).
  std::int64_t stride(int i) const;
  const char* name() const { return name_; }
  std::uintptr_t address() const { return reinterpret_cast<std::uintptr_t>(t_->data) + t_->byte_offset; }
  std::string shape() const;  // "(1, 7, 8, 16)"

  // The reference reads the CPU's memory: a float tensor of 16 or 32 bits (one lane) there.
  void require_cpu_float() const;
  // Element `offset` (in elements) as a float: float32 as is, 16-bit types widened exactly.
  float at(std::int64_t offset) const;
  // The kernel dtype a float tensor of 16 or 32 bits stands for.
  DType kernel_dtype() const;
  // Whether d is one the kernels take: float32, float16 or bfloat16, one lane (kernel_dtype names any
  // other type too, so callers check this first); and whether two tensors have one dtype.
  static bool is_kernel_float(DLDataType d) {
    return d.lanes == 1 && ((d.code == kDLFloat && (d.bits == 32 || d.bits == 16)) || (d.code == kDLBfloat && d.bits == 16));
  }
  static bool same_dtype(DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }
  static std::string dtype_name(DLDataType d);

 protected:
  explicit TensorArg(const char* name) : name_(name) {}
  void reset(const DLTensor& t) { t_ = &t; }

 private:
  const DLTensor* t_ = nullptr;
  const char* name_ = "tensor";
};

std::string shape_text(const std::vector<std::int64_t>& dims);

// The keywords every entry point takes, after flash_attn_func's (the module converts each Python
// object to these, refusing a value its type cannot hold: check_keywords sees the rest).
struct Keywords {
  double dropout_p = 0.0;
  std::optional<double> softmax_scale;
  bool causal = false;
  std::int64_t window_left = -1, window_right = -1;
  double softcap = 0.0;
  std::uint64_t seed = 1;
};
void check_keywords(const Keywords& kw);

// The reference's work past which a call is refused: B·H·seqlen_q·seqlen_k·head_dim multiply-adds
// (summed over packed sequences), 2^34, about a minute of a CPU core in float64 per pass.
constexpr std::int64_t kMaxReferenceWork = std::int64_t(1) << 34;

// One call's problem: the shapes read and checked, the inputs in the reference's (B, H, N, d)
// float32 layout, the options.
struct Problem {
  Shape s;  // the queries': B, H, N, d
  int kv_heads = 0, kv_len = 0;
  bool packed = false;
  std::vector<float> q, k, v, dout;
  std::vector<float> slopes;  // ALiBi's, (H) or (B, H) row by row (opt.alibi_batch_stride says which)
  std::vector<std::int32_t> cu_q, cu_k;
  DType dtype = DType::fp32;  // q's: where the plain float32 implementation rounds
  AttnOptions opt;            // but its pointers into slopes, cu_q, cu_k (options_of)
};

// q, k, v (B, N, H, d) and (B, N_k, H_k, d) — or, with cu_q and cu_k (both or neither), packed
// (total, heads, head_dim) —, dout like q (or null), ALiBi's slopes (heads) or (batch, heads) — packed:
// (sequences, heads) — (or null). Throws ArgError.
Problem reference_problem(const TensorArg& q, const TensorArg& k, const TensorArg& v, const TensorArg* dout,
                          const Keywords& kw, const TensorArg* alibi, const TensorArg* cu_q, const TensorArg* cu_k);

// P's options as the reference takes them: its dtype, and the pointers into P's own slopes and
// offsets, set here from the Problem where it lives (not in reference_problem, whose P is returned
// by a move when the compiler does not construct it in place, which would leave &P.cu_q dangling).
AttnOptions options_of(const Problem& P);

// A kernel's output for P: O (like q), dQ, dK, dV (like q, k, v), or LSE (B, H, N) or packed (H, N),
// checked against that shape and read in the reference's layout. Throws ArgError.
std::vector<float> kernel_output(const TensorArg& t, const Problem& P, std::int64_t B, std::int64_t N, std::int64_t H,
                                 bool lse);

// flash_attn_varlen_func's cu_seqlens_q, cu_seqlens_k: prefix sums of equal length (batch + 1),
// from 0, non-decreasing, to the tokens of q (n_q) and of k (n_k). Throws ArgError.
void require_prefix_sums(const std::vector<std::int32_t>& cu_q, const std::vector<std::int32_t>& cu_k, std::int64_t n_q,
                         std::int64_t n_k);

// The kernels' problem (flashsteps_gpu.cpp) from q's and k's dimensions: B, H, N, d and K/V's
// N_k, H_k, each at least 1 and at most int's, H a multiple of H_k. Throws ArgError.
Shape kernel_shape(const TensorArg& q, const TensorArg& k, bool packed);

// The standard ALiBi slopes of `heads` heads, 1 to kMaxHeads. Throws ArgError.
std::vector<float> alibi_slopes_of(std::int64_t heads);

}  // namespace fs::python
