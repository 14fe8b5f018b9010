// Steps 04, 05 and 06 on the CPU: the FlashAttention-2 forward (step 04's fa2) and the recomputation
// backward (step 05, dQ by atomics and deterministic), with FlashAttention's score features
// (common/flash_features.cuh) and packed sequences, and with step 06's block-sparse walk, their
// own source compiled by the host compiler and run by the emulator (common/emulator: every CUDA
// thread a fiber, every barrier honoured), through the launchers the steps call. The outputs are
// held to the rule the GPU tests hold them to (tests/test_steps_gpu.cpp): the fp64 reference
// under the fp32 rule.
//
// No substitute for the GPU tests (emulator.hpp says what the emulation cannot see); it runs on
// every machine, so that a tile bound, a tail, a causal or dropout mask that is wrong fails here
// first, before a kernel change reaches a GPU.
#include "common/emulator/emulator.hpp"  // first: it defines threadIdx, __syncthreads, ... for the kernels

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/block_mask.hpp"
#include "common/harness.hpp"
#include "common/reference.hpp"
#include "common/flash_features.cuh"
#include "common/verify.hpp"
#include "steps/04_online_softmax/flash2_forward.cuh"
#include "steps/05_recompute_backward/backward.cuh"
#include "steps/06_block_sparse/block_list_walk.cuh"
#include "tests/flash_checks.hpp"
#include "tests/flash_emulated.hpp"

namespace {

using fs::testing::FlashOutputs;

FlashOutputs poisoned(const fs::Shape& s) {
  const std::size_t n = s.elems(), kv = s.kv_elems();
  return {std::vector<float>(n, NAN), std::vector<float>(s.rows(), NAN), std::vector<float>(n, NAN),
          std::vector<float>(kv, NAN), std::vector<float>(kv, NAN)};
}

template <int D>
FlashOutputs run(const fs::Shape& s, const fs::HostProblem& p, bool causal, fs::Dropout dropout, bool atomic_dq,
                 const fs::ScoreMods& mods = {}, const fs::Packed& packed = {}) {
  FlashOutputs out = poisoned(s);
  std::vector<float> delta(s.rows(), NAN);
  fs::FwdParams fp =
      fs::testing::forward_params(s, p.q.data(), p.k.data(), p.v.data(), out.o.data(), out.lse.data(), causal, dropout);
  fp.mods = mods;
  fp.packed = packed;
  fs::BwdParams bp = fs::testing::backward_params(fp, p.dout.data(), out.dq.data(), out.dk.data(), out.dv.data());
  bp.variant = atomic_dq ? fs::kAtomicDQ : fs::kDeterministicDQ;
  bp.packed = packed;
  fs::testing::flash_emulated_pass<D>(fp, bp, atomic_dq, delta.data());
  return out;
}

// The same pass with every tensor in (B, rows, heads + pad, d) (fs::testing::Laid) instead of
// contiguous: the inputs placed there, the outputs read back from there.
template <int D>
FlashOutputs run_laid(const fs::Shape& s, const fs::HostProblem& p, bool causal, fs::Dropout dropout, bool atomic_dq,
                      const fs::ScoreMods& mods, const fs::Packed& packed, int pad) {
  const int H = s.H, Hkv = s.kv_heads(), N = s.N, Nk = s.keys(), d = s.d;
  const auto lq = fs::testing::Laid::rows_heads(s.B, H, N, d, pad), lk = fs::testing::Laid::rows_heads(s.B, Hkv, Nk, d, pad);
  const std::vector<float> q = lq.place(p.q, H, N, d), k = lk.place(p.k, Hkv, Nk, d), v = lk.place(p.v, Hkv, Nk, d);
  const std::vector<float> dout = lq.place(p.dout, H, N, d);
  std::vector<float> o(lq.size, NAN), dq(lq.size, NAN), dk(lk.size, NAN), dv(lk.size, NAN), lse(s.rows(), NAN);
  std::vector<float> delta(s.rows(), NAN);
  fs::FwdParams fp = fs::testing::forward_params(s, q.data(), k.data(), v.data(), o.data(), lse.data(), causal, dropout);
  fp.mods = mods;
  fp.packed = packed;
  fp.q_strides = fp.o_strides = lq.strides;
  fp.k_strides = fp.v_strides = lk.strides;
  fs::BwdParams bp = fs::testing::backward_params(fp, dout.data(), dq.data(), dk.data(), dv.data());  // dO, dQ like Q; dK, dV like K
  bp.variant = atomic_dq ? fs::kAtomicDQ : fs::kDeterministicDQ;
  bp.packed = packed;
  fs::testing::flash_emulated_pass<D>(fp, bp, atomic_dq, delta.data());
  return {lq.gather(o, s.elems(), H, N, d), lse, lq.gather(dq, s.elems(), H, N, d), lk.gather(dk, s.kv_elems(), Hkv, Nk, d),
          lk.gather(dv, s.kv_elems(), Hkv, Nk, d)};
}

// Bit for bit, NaN included.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("emulated steps 04 and 05: O, LSE, dQ, dK, dV match the fp64 reference on odd shapes, causal or not, "
          "with and without dropout, dQ by atomics and deterministic",
          "[flash][emulated]") {
  const int N = GENERATE(1, 17, 100);
  const int d = GENERATE(16, 32, 64, 128);
  const bool causal = GENERATE(false, true);
  const float p_drop = GENERATE(0.f, 0.2f);
  const bool atomic_dq = GENERATE(true, false);
  const fs::Shape s{2, 2, N, d};
  DYNAMIC_SECTION("N=" << N << " d=" << d << (causal ? " causal" : "") << " dropout=" << p_drop
                       << (atomic_dq ? " atomic dQ" : " deterministic dQ")) {
    const fs::HostProblem p = fs::random_problem(s, 1009ull * N + 31ull * d + (causal ? 7 : 0), true);
    const fs::Dropout dropout{p_drop, 1234};
    const FlashOutputs g = fs::dispatch_head_dim(d, [&](auto D) { return run<D>(s, p, causal, dropout, atomic_dq); });
    fs::testing::require_reference(s, fs::AttnOptions{fs::default_scale(d), causal, dropout}, p, g);
  }
}

TEST_CASE("emulated steps 04 and 05 with FlashAttention's score features: a sliding window, softcapping and ALiBi "
          "match the fp64 reference, forward and backward",
          "[flash][emulated][features]") {
  struct Features {
    int left, right;
    float softcap;
    bool alibi;
  };
  const int N = GENERATE(17, 100);
  const int d = GENERATE(16, 64);
  const bool causal = GENERATE(false, true);
  const bool atomic_dq = GENERATE(true, false);
  const fs::Shape s{2, 2, N, d};
  const std::vector<float> slopes = fs::alibi_slopes(s.H);
  for (const Features f : {Features{8, 0, 0.f, false}, Features{3, 5, 0.f, false}, Features{-1, 4, 0.f, false},
                           Features{20, -1, 0.f, false}, Features{0, 0, 0.f, false}, Features{-1, -1, 2.f, false},
                           Features{-1, -1, 0.f, true}, Features{5, 40, 1.5f, true}}) {
    DYNAMIC_SECTION("N=" << N << " d=" << d << (causal ? " causal" : "") << (atomic_dq ? " atomic" : " deterministic")
                         << " window (" << f.left << ", " << f.right << ") softcap " << f.softcap
                         << (f.alibi ? " alibi" : "")) {
      fs::ScoreMods mods;
      mods.window_left = f.left;
      mods.window_right = f.right;
      mods.softcap = f.softcap;
      mods.alibi_slopes = f.alibi ? slopes.data() : nullptr;
      const fs::Dropout dropout{f.softcap > 0 ? 0.1f : 0.f, 99};  // and with dropout, where it softcaps
      const fs::HostProblem p = fs::random_problem(s, 7ull * N + d + f.left + 3ull * f.right, true);
      const FlashOutputs g =
          fs::dispatch_head_dim(d, [&](auto D) { return run<D>(s, p, causal, dropout, atomic_dq, mods); });
      fs::testing::require_reference(
          s, fs::testing::with_score_mods(fs::AttnOptions{fs::default_scale(d), causal, dropout}, mods, slopes.data()),
          p, g);
    }
  }
}

TEST_CASE("emulated steps 04 and 05 with K and V of their own length and heads (Nk != N, grouped-query and "
          "multi-query attention) match the fp64 reference, with the masks at the bottom-right corner",
          "[flash][emulated][features]") {
  struct Kv {
    int N, Nk, H, Hkv;
  };
  const int d = GENERATE(16, 64);
  const bool causal = GENERATE(false, true);
  const bool atomic_dq = GENERATE(true, false);
  const std::vector<float> slopes = fs::alibi_slopes(4);
  // Fewer keys than queries (the first rows see none, causal), more, one query; GQA and MQA.
  for (const Kv kv : {Kv{100, 37, 2, 2}, Kv{37, 100, 2, 2}, Kv{1, 70, 2, 1}, Kv{70, 70, 4, 2}, Kv{45, 90, 4, 1},
                      Kv{90, 45, 4, 2}}) {
    for (const bool featured : {false, true}) {  // alone, and with a window, ALiBi and dropout
      DYNAMIC_SECTION("N=" << kv.N << " Nk=" << kv.Nk << " H=" << kv.H << " Hkv=" << kv.Hkv << " d=" << d
                           << (causal ? " causal" : "") << (atomic_dq ? " atomic" : " deterministic")
                           << (featured ? " window (20, 3) alibi dropout" : "")) {
        fs::Shape s{2, kv.H, kv.N, d};
        s.Nk = kv.Nk;
        s.Hkv = kv.Hkv;
        fs::ScoreMods mods;
        if (featured) {
          mods.window_left = 20;
          mods.window_right = 3;
          mods.alibi_slopes = slopes.data();
        }
        const fs::Dropout dropout{featured ? 0.1f : 0.f, 5};
        const fs::HostProblem p = fs::random_problem(s, 13ull * kv.N + kv.Nk + kv.Hkv, true);
        const FlashOutputs g =
            fs::dispatch_head_dim(d, [&](auto D) { return run<D>(s, p, causal, dropout, atomic_dq, mods); });
        fs::testing::require_reference(
            s, fs::testing::with_score_mods(fs::AttnOptions{fs::default_scale(d), causal, dropout}, mods, slopes.data()),
            p, g);
      }
    }
  }
}

// (No ": " in a test's name: Catch's console reporter indents the lines after the first by where
// it ends, and aborts when that is past its width.)
TEST_CASE("emulated steps 04 and 05 with packed sequences (cu_seqlens) match the fp64 reference, each sequence "
          "seeing only its own keys, every mask at its own bottom-right corner",
          "[flash][emulated][features][packed]") {
  struct Config {
    int H, Hkv;
    fs::ScoreMods mods;
    float dropout;
  };
  const int d = GENERATE(16, 64);
  const bool causal = GENERATE(false, true);
  const bool atomic_dq = GENERATE(true, false);
  // (queries, keys) of each sequence: lengths no tile divides; the first longer than a forward tile
  // (its second tile's CTAs are past every other sequence's end); one with keys and no query (its
  // dK, dV must still be written, 0), an empty one, one with queries and no key (O = 0, LSE = −inf,
  // dQ = 0); fewer keys than queries and more. The sequences with both start at query and key
  // tokens (even, even), (odd, even), (even, odd), (odd, odd): dropout's 2 × 2 blocks of tokens fall
  // across the kernels' tiles every way.
  const fs::testing::PackedSequences seqs({{151, 141}, {0, 5}, {0, 0}, {20, 0}, {1, 45}, {49, 20}, {13, 30}});
  const std::vector<float> slopes = fs::alibi_slopes(4);
  for (const Config c : {Config{2, 2, {}, 0.f},  // alone
                         Config{4, 2, fs::testing::score_mods(7, 2, 0.f, slopes.data()), 0.15f},
                         Config{4, 1, fs::testing::score_mods(-1, 4, 2.f, nullptr), 0.2f}}) {
    DYNAMIC_SECTION("d=" << d << " H=" << c.H << " Hkv=" << c.Hkv << (causal ? " causal" : "")
                         << (atomic_dq ? " atomic" : " deterministic") << " window (" << c.mods.window_left << ", "
                         << c.mods.window_right << ") softcap " << c.mods.softcap
                         << (c.mods.alibi_slopes ? " alibi" : "") << " dropout " << c.dropout) {
      const fs::Shape s = seqs.shape(c.H, c.Hkv, d);
      const fs::Dropout dropout{c.dropout, 77};
      const fs::HostProblem p = fs::random_problem(s, 101ull * d + c.Hkv + (causal ? 1 : 0), true);
      const FlashOutputs g = fs::dispatch_head_dim(d, [&](auto D) {
        return run<D>(s, p, causal, dropout, atomic_dq, c.mods, seqs.params(seqs.cu_q.data(), seqs.cu_k.data()));
      });
      const fs::AttnOptions attn =
          fs::testing::with_score_mods(fs::AttnOptions{fs::default_scale(d), causal, dropout}, c.mods, slopes.data());
      fs::testing::require_reference(s, seqs.reference(attn), p, g);
    }
  }
}

// ALiBi slopes of shape (B, H), flash_attn_func's second form: batch b's heads take row b, and with
// packed sequences sequence b's (flash_attn_varlen_func's). The rows differ (batch_slopes), so a
// kernel that read row 0, or the head's slope of the (H) form, for every batch fails the check: the
// forward and dQ kernels find the batch from their query head, the dK/dV kernel from its K/V head's
// group, and the packed kernels from their sequence (blockIdx.z) instead.
TEST_CASE("emulated steps 04 and 05 with ALiBi slopes of shape (B, H) match the fp64 reference, each batch or "
          "packed sequence taking its own row",
          "[flash][emulated][features]") {
  const int d = GENERATE(16, 64);
  const bool causal = GENERATE(false, true);
  const bool atomic_dq = GENERATE(true, false);
  fs::Shape gqa{3, 4, 45, d};  // grouped K/V heads of their own length, under a window
  gqa.Nk = 70;
  gqa.Hkv = 2;
  const std::vector<float> rows = fs::testing::batch_slopes(gqa.B, gqa.H);
  const fs::testing::PackedSequences seqs({{37, 50}, {0, 4}, {20, 20}, {49, 13}, {1, 30}});
  const std::vector<float> seq_rows = fs::testing::batch_slopes(seqs.count(), 4);
  for (const bool packed : {false, true}) {
    DYNAMIC_SECTION("d=" << d << (causal ? " causal" : "") << (atomic_dq ? " atomic" : " deterministic")
                         << (packed ? " packed: a row per sequence" : " a row per batch")) {
      const fs::Shape s = packed ? seqs.shape(4, 2, d) : gqa;
      const std::vector<float>& slopes = packed ? seq_rows : rows;
      // With a softcap where the sequences are packed: FlashFeatures rather than FlashFeaturesNoCap.
      const fs::ScoreMods mods = fs::testing::score_mods(20, 3, packed ? 2.f : 0.f, slopes.data(), s.H);
      const fs::Dropout dropout{packed ? 0.1f : 0.f, 17};
      const fs::Packed pk = packed ? seqs.params(seqs.cu_q.data(), seqs.cu_k.data()) : fs::Packed{};
      const fs::HostProblem p = fs::random_problem(s, 71ull * d + s.N + (causal ? 1 : 0), true);
      const FlashOutputs g = fs::dispatch_head_dim(d, [&](auto D) { return run<D>(s, p, causal, dropout, atomic_dq, mods, pk); });
      const fs::AttnOptions attn =
          fs::testing::with_score_mods(fs::AttnOptions{fs::default_scale(d), causal, dropout}, mods, slopes.data());
      fs::testing::require_reference(s, packed ? seqs.reference(attn) : attn, p, g);
    }
  }
}

TEST_CASE("emulated steps 04 and 05 with every tensor in another layout (Strides) give the bits of the contiguous "
          "layout, forward and both backwards",
          "[flash][emulated][strides]") {
  struct Config {
    fs::Shape shape;
    fs::ScoreMods mods;
    float dropout;
    bool packed;
  };
  const int d = GENERATE(16, 64);
  const bool causal = GENERATE(false, true);
  const bool atomic_dq = GENERATE(true, false);
  fs::Shape gqa{2, 4, 45, d};  // grouped K/V heads of their own length, under a window
  gqa.Nk = 70;
  gqa.Hkv = 2;
  const fs::testing::PackedSequences seqs({{20, 33}, {0, 3}, {41, 17}, {9, 0}});
  const std::vector<float> slopes = fs::alibi_slopes(gqa.H);
  for (const Config c : {Config{fs::Shape{2, 2, 37, d}, {}, 0.1f, false},  // the plain kernels, with dropout
                         Config{gqa, fs::testing::score_mods(9, 3, 0.f, slopes.data()), 0.f, false},
                         Config{seqs.shape(2, 1, d), fs::testing::score_mods(-1, 5, 1.5f, nullptr), 0.2f, true}})
    // (B, N, H, d), flash_attn_func's (varlen's (tokens, H, d) for packed sequences); and a head
    // of a wider tensor, as a slice of packed QKV is: rows 3·H·d floats apart.
    for (const int pad : {0, 2 * c.shape.H}) {
      DYNAMIC_SECTION("d=" << d << " H=" << c.shape.H << " Hkv=" << c.shape.kv_heads() << " N=" << c.shape.N
                           << " Nk=" << c.shape.keys() << (causal ? " causal" : "")
                           << (atomic_dq ? " atomic" : " deterministic") << (c.packed ? " packed" : "")
                           << " window (" << c.mods.window_left << ", " << c.mods.window_right << ") dropout "
                           << c.dropout << " pad " << pad) {
        const fs::Shape& s = c.shape;
        const fs::Dropout dropout{c.dropout, 31};
        const fs::Packed packed = c.packed ? seqs.params(seqs.cu_q.data(), seqs.cu_k.data()) : fs::Packed{};
        const fs::HostProblem p = fs::random_problem(s, 57ull * d + s.N + (causal ? 1 : 0), true);
        const auto [dense, laid] = fs::dispatch_head_dim(d, [&](auto D) {
          return std::pair{run<D>(s, p, causal, dropout, atomic_dq, c.mods, packed),
                           run_laid<D>(s, p, causal, dropout, atomic_dq, c.mods, packed, pad)};
        });
        // The emulator runs the CTAs in one order, so that even the atomic dQ adds up alike.
        REQUIRE(same_bits(dense.o, laid.o));
        REQUIRE(same_bits(dense.lse, laid.lse));
        REQUIRE(same_bits(dense.dq, laid.dq));
        REQUIRE(same_bits(dense.dk, laid.dk));
        REQUIRE(same_bits(dense.dv, laid.dv));
        // And the bits are right.
        const fs::AttnOptions attn = fs::testing::with_score_mods(fs::AttnOptions{fs::default_scale(d), causal, dropout},
                                                                  c.mods, slopes.data());
        fs::testing::require_reference(s, c.packed ? seqs.reference(attn) : attn, p, laid);
      }
    }
}

TEST_CASE("the kernels' launchers refuse a row off the 16-byte grid", "[flash][emulated][strides]") {
  const fs::Shape s{1, 2, 8, 16};
  const fs::HostProblem p = fs::random_problem(s, 5, true);
  FlashOutputs g = poisoned(s);
  fs::FwdParams fp =
      fs::testing::forward_params(s, p.q.data(), p.k.data(), p.v.data(), g.o.data(), g.lse.data(), false);
  std::vector<float> delta(s.rows());
  const fs::BwdParams bp = fs::testing::backward_params(fp, p.dout.data(), g.dq.data(), g.dk.data(), g.dv.data());
  fp.k_strides.row = 18;  // rows 72 bytes apart (the forward refuses it, before the backward)
  REQUIRE_THROWS_AS(fs::testing::flash_emulated_pass<16>(fp, bp, false, delta.data()), fs::CudaError);
  fp.k_strides.row = 16;
  fp.q = p.q.data() + 2;  // 8 bytes past a 16-byte boundary
  REQUIRE_THROWS_AS(fs::testing::flash_emulated_pass<16>(fp, bp, false, delta.data()), fs::CudaError);
}

TEST_CASE("the kernels' launchers refuse packed sequences they cannot run", "[flash][emulated][packed]") {
  const fs::testing::PackedSequences seqs({{3, 3}, {5, 4}});
  const fs::Shape s = seqs.shape(1, 1, 16);
  const fs::HostProblem p = fs::random_problem(s, 3, true);
  FlashOutputs g = poisoned(s);
  std::vector<float> delta(s.rows());
  fs::FwdParams fp =
      fs::testing::forward_params(s, p.q.data(), p.k.data(), p.v.data(), g.o.data(), g.lse.data(), false);
  fp.packed = seqs.params(seqs.cu_q.data(), seqs.cu_k.data());
  fs::BwdParams bp = fs::testing::backward_params(fp, p.dout.data(), g.dq.data(), g.dk.data(), g.dv.data());
  bp.packed = fp.packed;
  // The plain kernels know no sequences: they would attend across them.
  REQUIRE_THROWS_AS((fs::launch_flash2<16, fs::Flash2Tile<16>, fs::DenseWalk, fs::NoDropout>(fp)), fs::CudaError);
  REQUIRE_THROWS_AS((fs::launch_backward<16, fs::DenseWalk, fs::NoDropout>(bp, true, delta.data())), fs::CudaError);
  // Packed tokens are one batch.
  fp.shape.B = bp.shape.B = 2;
  REQUIRE_THROWS_AS(fs::testing::flash_emulated_pass<16>(fp, bp, false, delta.data()), fs::CudaError);  // the forward's
  REQUIRE_THROWS_AS((fs::launch_backward<16, fs::DenseWalk, fs::NoDropout, fs::FlashFeaturesNoCap>(bp, false, delta.data())),
                    fs::CudaError);
  // What the FlashFeatures kernels take, they run.
  fp.shape.B = bp.shape.B = 1;
  REQUIRE_NOTHROW(fs::testing::flash_emulated_pass<16>(fp, bp, false, delta.data()));
}

TEST_CASE("dropout's keep bits of a tile are the generator's at the tile's tokens, whatever the parity of the span's "
          "first query and key",
          "[flash][emulated][packed]") {
  const fs::Dropout dp{0.4f, 0x5eedull};
  const std::uint32_t threshold = fs::dropout_threshold(dp.p);
  const long long bh = 3;
  for (int q0 = 0; q0 < 4; ++q0)
    for (int k0 = 0; k0 < 4; ++k0) {
      INFO("q0=" << q0 << " k0=" << k0);
      const fs::PhiloxDropout dropout(dp, bh, q0, k0);
      // A forward tile (rows are queries): 2 queries from row 6, 16 keys from key 32 of the span.
      const auto rows = dropout.keep<false, 2, 16>(6, 32);
      for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 16; ++c) {
          const bool kept = (rows.bits >> (r * 16 + c)) & 1u;
          REQUIRE(kept == fs::dropout_keep(dp.seed, threshold, bh, q0 + 6 + r, k0 + 32 + c));
        }
      // A dK/dV tile (rows are keys): 2 keys from key 10, 8 queries from row 24.
      const auto keys = dropout.keep<true, 2, 8>(10, 24);
      for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 8; ++c) {
          const bool kept = (keys.bits >> (r * 8 + c)) & 1u;
          REQUIRE(kept == fs::dropout_keep(dp.seed, threshold, bh, q0 + 24 + c, k0 + 10 + r));
        }
    }
}

TEST_CASE("a window shortens the kernels' walks to the tiles it reaches", "[flash][emulated][features]") {
  fs::ScoreMods m;
  m.window_left = 8;
  m.window_right = 0;
  const fs::FlashFeatures mods(m, fs::Shape{1, 1, 1000, 64}, 0);
  using W = fs::DenseWalk<64>;
  // Queries 256..319 see keys 248..319: the tiles at 192 and 256, of the 16 at N = 1000.
  const W keys = mods.keys(W::range(0, 1000), 256, 319);
  REQUIRE(keys.first == 192);
  REQUIRE(keys.size() == 2);
  // Keys 256..319 are seen by queries 256..327: the tiles at 256 and 320.
  const W queries = mods.queries(W::range(0, 1000), 256, 319);
  REQUIRE(queries.first == 256);
  REQUIRE(queries.size() == 2);
  // Causal walks (keys up to the last row) are clipped within what they visit already.
  REQUIRE(mods.keys(W::range(0, 320), 256, 319).size() == 2);
  // Unbounded sides leave the walk as it was.
  const fs::FlashFeatures none(fs::ScoreMods{}, fs::Shape{1, 1, 1000, 64}, 0);
  REQUIRE(none.keys(W::range(0, 1000), 256, 319).size() == 16);
  REQUIRE(none.queries(W::range(64, 1000), 0, 63).first == 64);
}

TEST_CASE("emulated step 06: block-sparse forward and backward match the fp64 reference under the same mask",
          "[flash][emulated][block_sparse]") {
  const int d = GENERATE(16, 64);
  const bool causal = GENERATE(false, true);
  const bool atomic_dq = GENERATE(true, false);
  const int N = 600, block = 256;  // 256: a multiple of every compiled d's tiles; the last block ends past N
  const fs::Shape s{1, 2, N, d};
  DYNAMIC_SECTION("N=" << N << " d=" << d << (causal ? " causal" : "") << (atomic_dq ? " atomic" : " deterministic")) {
    fs::BlockMask mask = fs::empty_mask(N, block, block);  // a row with no block at all, one with all
    mask.set(0, 0, true);
    mask.set(0, 2, true);
    mask.set(2, 0, true);
    mask.set(2, 1, true);
    mask.set(2, 2, true);
    const fs::BlockLists l = fs::to_lists(mask, causal);
    fs::BlockSparse sp{block, block, mask.Tr, mask.Tc, l.row_ptr.data(), l.col_idx.data(), l.col_ptr.data(),
                       l.row_idx.data()};
    const fs::HostProblem p = fs::random_problem(s, 4242ull + d + (causal ? 1 : 0), true);
    FlashOutputs g = poisoned(s);
    std::vector<float> delta(s.rows(), NAN);
    fs::FwdParams fp =
        fs::testing::forward_params(s, p.q.data(), p.k.data(), p.v.data(), g.o.data(), g.lse.data(), causal);
    fp.sparse = sp;
    const fs::BwdParams bp =
        fs::testing::backward_params(fp, p.dout.data(), g.dq.data(), g.dk.data(), g.dv.data());
    fs::dispatch_head_dim(d, [&](auto D) { fs::testing::flash_emulated_block_sparse<D>(fp, bp, atomic_dq, delta.data()); });
    const fs::BlockMaskView view{mask.dense.data(), mask.block_r, mask.block_c, mask.Tc};
    fs::testing::require_reference(s, fs::AttnOptions{fs::default_scale(d), causal, {}, &view}, p, g);
  }
}
