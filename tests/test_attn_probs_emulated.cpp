// The attention probabilities' kernel (common/attn_probs.cuh: flash_attn_func's S_dmask, which the
// Python module returns for return_attn_probs=True), its own source run on the CPU by
// common/emulator, against the fp64 reference's probabilities (reference_probs_row): the values
// under the project's forward rule (common/verify.hpp), and the dropout mask the sign carries
// element by element — causal and windows aligned to the bottom-right corner, softcap, ALiBi of
// shape (H) and (B, H), Nk ≠ N, grouped K/V heads, packed sequences, tensors in flash_attn_func's
// strided layout, and bf16, fp16 and fp32 inputs.
#include "common/emulator/emulator.hpp"  // first: it defines threadIdx, __syncthreads, ... for the kernels

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/attn_probs.cuh"
#include "common/harness.hpp"
#include "common/philox.hpp"
#include "common/reference.hpp"
#include "common/verify.hpp"
#include "tests/flash_checks.hpp"
#include "tests/host_convert.hpp"

namespace {

using fs::DType;
using fs::testing::Laid;
using fs::testing::PackedSequences;

struct Case {
  int B = 1, H = 2, Hkv = 2, N = 64, Nk = 64, d = 64;
  bool causal = false;
  int left = -1, right = -1;
  float softcap = 0.f;
  int alibi = 0;  // 0: none; 1: (H) slopes; 2: (B, H) — packed: (sequences, H) — with rows that differ
  float p_drop = 0.f;
  std::uint64_t seed = 7;
  int pad = 0;  // the tensors' rows hold this many more heads' room (a slice of packed QKV)
  std::optional<PackedSequences> packed;
  int extra_rows = 0, extra_cols = 0;  // packed: P's room past the longest sequence's lengths
};

template <typename E>
std::vector<E> elements(const std::vector<float>& x) {
  if constexpr (std::is_same_v<E, float>) {
    return x;
  } else {
    return fs::testing::to_16bit<E>(x);
  }
}

// P by the kernel, P by the reference in float64 and float32, laid out (batches, H, rows, cols);
// then the values under the forward rule and the sign bits element by element.
template <typename E>
void check_probs(DType dtype, const Case& c, bool small_grid = false) {
  fs::Shape s{c.B, c.H, c.N, c.d};
  s.Nk = c.Nk;
  s.Hkv = c.Hkv;
  if (c.packed) s = c.packed->shape(c.H, c.Hkv, c.d);
  const int batches = c.packed ? c.packed->count() : s.B;
  const fs::HostProblem prob = fs::random_problem(s, 1000 + 17ull * s.N + s.keys() + 3ull * c.H, false, dtype);
  const std::vector<float> slopes = c.alibi == 2 ? fs::testing::batch_slopes(batches, c.H) : fs::alibi_slopes(c.H);

  // The reference's options, and its LSE as the forward returns it (float32).
  fs::AttnOptions opt{fs::default_scale(c.d), c.causal, fs::Dropout{c.p_drop, c.seed}, nullptr, dtype};
  opt.kv_heads = s.kv_heads();
  opt.kv_len = s.keys();
  opt.window_left = c.left;
  opt.window_right = c.right;
  opt.softcap = c.softcap;
  opt.alibi_slopes = c.alibi ? slopes.data() : nullptr;
  opt.alibi_batch_stride = c.alibi == 2 ? c.H : 0;
  if (c.packed) opt = c.packed->reference(opt);
  std::vector<double> o64, lse64;
  fs::reference_forward<double>(s, prob.q.data(), prob.k.data(), prob.v.data(), opt, fs::all_indices(s.rows()), o64,
                                lse64);
  const std::vector<float> lse(lse64.begin(), lse64.end());

  // The kernel's inputs in flash_attn_func's layout: (batch, tokens, heads + pad, d).
  const Laid ql = Laid::rows_heads(s.B, s.H, s.N, s.d, c.pad), kl = Laid::rows_heads(s.B, s.kv_heads(), s.keys(), s.d, c.pad);
  const std::vector<E> q = elements<E>(ql.place(prob.q, s.H, s.N, s.d));
  const std::vector<E> k = elements<E>(kl.place(prob.k, s.kv_heads(), s.keys(), s.d));

  fs::ProbsParams p;
  p.q = q.data();
  p.k = k.data();
  p.lse = lse.data();
  p.dtype = dtype;
  p.shape = s;
  p.q_strides = ql.strides;
  p.k_strides = kl.strides;
  p.scale = opt.scale;
  p.causal = c.causal;
  p.dropout = opt.dropout;
  p.mods = fs::testing::score_mods(fs::clamp_reach(c.left, s.N, s.keys()), fs::clamp_reach(c.right, s.N, s.keys()),
                                   c.softcap, c.alibi ? slopes.data() : nullptr, c.alibi == 2 ? c.H : 0);
  p.rows = c.packed ? c.packed->max_q + c.extra_rows : s.N;
  p.cols = c.packed ? c.packed->max_k + c.extra_cols : s.keys();
  if (c.packed) p.packed = c.packed->params(c.packed->cu_q.data(), c.packed->cu_k.data());
  std::vector<float> got(std::size_t(p.elements()), NAN);  // NaN: an entry no thread wrote shows
  p.p = got.data();
  // The launch's own grid, or a small one whose threads loop over many entries each.
  const dim3 grid = small_grid ? dim3(3) : fs::attn_probs_grid(p);
  const dim3 block = small_grid ? dim3(64) : dim3(fs::kProbsThreads);
  fs::emu::launch(fs::attn_probs_kernel<E>, grid, block, 0, p);

  // The reference's P in the same layout, zero past a sequence's lengths.
  std::vector<double> want(got.size(), 0.0);
  std::vector<float> want32(got.size(), 0.f);
  std::vector<double> row64;
  std::vector<float> row32;
  for (std::int64_t row = 0; row < s.rows(); ++row) {
    const std::int64_t bh = row / s.N, t = row % s.N;
    std::int64_t b = bh / s.H, i = t;
    if (c.packed) {
      b = 0;
      while (c.packed->cu_q[b + 1] <= t) ++b;
      i = t - c.packed->cu_q[b];
    }
    fs::reference_probs_row<double>(s, prob.q.data(), prob.k.data(), opt, row, row64);
    fs::reference_probs_row<float>(s, prob.q.data(), prob.k.data(), opt, row, row32);
    const std::size_t at = std::size_t(((b * s.H + bh % s.H) * p.rows + i) * p.cols);
    for (std::size_t j = 0; j < row64.size(); ++j) {
      want[at + j] = row64[j];
      want32[at + j] = row32[j];
    }
  }

  fs::ErrorStat ek, ef;
  std::int64_t sign_mismatches = 0, dropped = 0, entries = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    ek.add(got[e], want[e]);
    ef.add(want32[e], want[e]);
    sign_mismatches += std::signbit(got[e]) != std::signbit(want[e]);
    dropped += std::signbit(want[e]);
  }
  entries = std::int64_t(got.size());
  const fs::TensorCheck check = fs::judge("P", ek, ef, fs::kForwardFactor, fs::kForwardFloor);
  INFO(fs::dtype_name(dtype) << " B=" << s.B << " H=" << s.H << " Hkv=" << s.kv_heads() << " N=" << s.N
                             << " Nk=" << s.keys() << " d=" << s.d << (c.causal ? " causal" : "") << " window ("
                             << c.left << ", " << c.right << ") softcap " << c.softcap << " alibi " << c.alibi
                             << " dropout " << c.p_drop << (c.packed ? " packed" : "") << ": P err " << check.err
                             << " (fp32 " << check.err_fp32 << ", tol " << check.tol << "), " << check.bad
                             << " not finite, " << sign_mismatches << " signs differ, " << dropped << " of " << entries
                             << " dropped");
  REQUIRE(check.pass());
  REQUIRE(sign_mismatches == 0);  // the mask, element by element (−0 where a masked entry was dropped)
  if (c.p_drop > 0.f) {
    REQUIRE(dropped > 0);
  } else {
    REQUIRE(dropped == 0);
  }
  // Each row that sees a key sums to 1 in |P|.
  for (std::int64_t r = 0; r < std::int64_t(got.size()) / p.cols; ++r) {
    double sum = 0;
    for (int j = 0; j < p.cols; ++j) sum += std::abs(double(got[std::size_t(r * p.cols + j)]));
    if (sum != 0) REQUIRE(sum == Approx(1.0).epsilon(1e-4));
  }
}

}  // namespace

TEST_CASE("the probabilities' kernel on the CPU: the fp64 reference's P and its dropout mask, every feature",
          "[emulated][probs]") {
  SECTION("bf16, grouped K/V heads, more keys, causal, a window, softcap, ALiBi (B, H), dropout; strided") {
    Case c;
    c.B = 2, c.H = 4, c.Hkv = 2, c.N = 70, c.Nk = 97, c.causal = true, c.left = 20, c.right = 3, c.softcap = 1.5f;
    c.alibi = 2, c.p_drop = 0.2f, c.pad = 3;
    check_probs<__nv_bfloat16>(DType::bf16, c);
  }
  SECTION("fp16, the plain problem") {
    Case c;
    c.N = c.Nk = 130, c.d = 32;
    check_probs<__half>(DType::fp16, c);
  }
  SECTION("fp32, multi-query, fewer keys than queries, causal (rows that see no key), dropout; a small grid") {
    Case c;
    c.H = 2, c.Hkv = 1, c.N = 100, c.Nk = 37, c.causal = true, c.p_drop = 0.3f, c.seed = 0xfeedface12345ull;
    check_probs<float>(DType::fp32, c, true);
  }
  SECTION("bf16, ALiBi (H) and a window wider than the sequence on one side, dropout") {
    Case c;
    c.B = 3, c.H = 3, c.Hkv = 1, c.N = 33, c.Nk = 50, c.left = 1000, c.right = 0, c.alibi = 1, c.p_drop = 0.1f;
    check_probs<__nv_bfloat16>(DType::bf16, c);
  }
  SECTION("fp16, packed sequences (odd starts, an empty one, one without keys), everything, dropout") {
    Case c;
    c.H = 4, c.Hkv = 2, c.d = 32, c.causal = true, c.left = 6, c.right = 2, c.softcap = 2.f, c.alibi = 2, c.p_drop = 0.25f;
    c.packed.emplace(std::vector<std::pair<int, int>>{{5, 5}, {3, 8}, {9, 4}, {0, 3}, {4, 0}, {13, 21}});
    c.extra_rows = 2, c.extra_cols = 3;
    check_probs<__half>(DType::fp16, c);
  }
  SECTION("bf16, packed sequences without features or dropout") {
    Case c;
    c.H = 2, c.Hkv = 2;
    c.packed.emplace(std::vector<std::pair<int, int>>{{17, 17}, {40, 33}, {1, 9}});
    check_probs<__nv_bfloat16>(DType::bf16, c);
  }
}

// The sign is exactly dropout_keep's mask (common/philox.hpp), the one every step's forward and
// backward draw, checked here against the generator itself and not only through the reference.
TEST_CASE("the probabilities' signs are the Philox dropout mask of (b·H + h, query, key)", "[emulated][probs]") {
  const fs::Shape s{2, 3, 19, 16};
  const fs::HostProblem prob = fs::random_problem(s, 5, false, DType::fp32);
  std::vector<float> lse(std::size_t(s.rows()), 0.f);  // any finite LSE: the signs do not depend on it
  const Laid l = Laid::rows_heads(s.B, s.H, s.N, s.d);
  const std::vector<float> q = l.place(prob.q, s.H, s.N, s.d), k = l.place(prob.k, s.H, s.N, s.d);
  fs::ProbsParams p;
  p.q = q.data();
  p.k = k.data();
  p.lse = lse.data();
  p.shape = s;
  p.q_strides = p.k_strides = l.strides;
  p.scale = 0.25f;
  p.dropout = fs::Dropout{0.5f, 0x0123456789abcdefull};
  p.rows = p.cols = s.N;
  std::vector<float> got(std::size_t(p.elements()), NAN);
  p.p = got.data();
  fs::emu::launch(fs::attn_probs_kernel<float>, fs::attn_probs_grid(p), dim3(fs::kProbsThreads), 0, p);
  const std::uint32_t threshold = fs::dropout_threshold(p.dropout.p);
  std::int64_t kept = 0;
  for (std::int64_t bh = 0; bh < s.heads(); ++bh)
    for (int i = 0; i < s.N; ++i)
      for (int j = 0; j < s.N; ++j) {
        const float x = got[std::size_t((bh * s.N + i) * s.N + j)];
        const bool keep = fs::dropout_keep(p.dropout.seed, threshold, std::uint64_t(bh), std::uint32_t(i), std::uint32_t(j));
        INFO("head " << bh << " query " << i << " key " << j << ": " << x);
        REQUIRE(std::signbit(x) == !keep);
        REQUIRE(x != 0.f);  // nothing masked here
        kept += keep;
      }
  REQUIRE(double(kept) / double(got.size()) == Approx(0.5).margin(0.05));
}
