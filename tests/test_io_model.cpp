// The IO model's counts against hand counts at small shapes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/block_mask.hpp"
#include "common/harness.hpp"
#include "common/io_model.hpp"
#include "common/varlen.hpp"
#include "steps/05_recompute_backward/backward.hpp"
#include "steps/registry.hpp"

TEST_CASE("standard attention forward: 3Nd + 2N² floats read, 2N² + Nd + N written, per head", "[io]") {
  // N = 2, d = 3: reads Q, K (12) + S (4) + P (4) + V (6) = 26 floats; writes S, P (8) + LSE (2) + O (6) = 16.
  const fs::IoCount one = fs::io_standard_forward({1, 1, 2, 3});
  REQUIRE(one.read_bytes == 26 * 4);
  REQUIRE(one.write_bytes == 16 * 4);
  const fs::IoCount six = fs::io_standard_forward({2, 3, 2, 3});
  REQUIRE(six.read_bytes == 6 * one.read_bytes);
  REQUIRE(six.write_bytes == 6 * one.write_bytes);
}

TEST_CASE("standard attention backward: 5N² + 7Nd + N read, 2N² + 3Nd + N written, per head", "[io]") {
  // N = 2, d = 3: reads 5·4 + 7·6 + 2 = 64 floats; writes 2·4 + 3·6 + 2 = 28.
  const fs::IoCount io = fs::io_standard_backward({1, 1, 2, 3});
  REQUIRE(io.read_bytes == 64 * 4);
  REQUIRE(io.write_bytes == 28 * 4);
}

TEST_CASE("the N² term dominates standard attention at long sequences", "[io]") {
  const fs::IoCount io = fs::io_standard_forward({1, 1, 4096, 64});
  const double n2_bytes = 4.0 * 4096.0 * 4096.0 * 4;  // S and P, each written and read once
  REQUIRE(double(io.total()) == Approx(n2_bytes).epsilon(0.07));
}

TEST_CASE("every step's IO model is wired into the table of steps", "[io]") {
  for (const auto& step : fs::all_steps()) {
    INFO(step.id);
    REQUIRE(step.io_forward({1, 1, 64, 64}, {0.125f}).total() > 0);
    if (step.backward) REQUIRE(step.io_backward({1, 1, 64, 64}, {0.125f}).total() > 0);
  }
}

TEST_CASE("fused forward: 3Nd + N² read, N² + Nd + N written (no S), and the backward drops dP and D", "[io]") {
  // N = 2, d = 3: reads Q, K (12) + P (4) + V (6) = 22 floats; writes P (4) + O (6) + LSE (2) = 12.
  const fs::IoCount f = fs::io_fused_forward({1, 1, 2, 3});
  REQUIRE(f.read_bytes == 22 * 4);
  REQUIRE(f.write_bytes == 12 * 4);
  // reads 4·4 + 6·6 = 52; writes 4 + 3·6 = 22.
  const fs::IoCount b = fs::io_fused_backward({1, 1, 2, 3});
  REQUIRE(b.read_bytes == 52 * 4);
  REQUIRE(b.write_bytes == 22 * 4);
}

// N = 5, d = 4, Br = Bc = 2: query tiles [0,2) [2,4) [4,5), key tiles likewise.
TEST_CASE("tiled (two passes): Q once, K twice and V once per query tile", "[io]") {
  const fs::Shape s{1, 1, 5, 4};
  // Non-causal: Nd + 3 tiles · 3Nd = 20 + 180 reads; O and LSE written once: 20 + 5.
  REQUIRE(fs::io_tiled_forward(s, false, 2, 2).read_bytes == 200 * 4);
  REQUIRE(fs::io_tiled_forward(s, false, 2, 2).write_bytes == 25 * 4);
  // Causal: the query tiles see 2, 4, 5 keys: 20 + 3·(2 + 4 + 5)·4 = 152.
  REQUIRE(fs::io_tiled_forward(s, true, 2, 2).read_bytes == 152 * 4);
}

TEST_CASE("FlashAttention-2 order: Q once, each needed K/V tile once per query tile", "[io]") {
  const fs::Shape s{1, 1, 5, 4};
  REQUIRE(fs::io_flash2_forward(s, false, 2, 2).read_bytes == (20 + 2 * 3 * 20) * 4);
  REQUIRE(fs::io_flash2_forward(s, true, 2, 2).read_bytes == (20 + 2 * 11 * 4) * 4);
  REQUIRE(fs::io_flash2_forward(s, true, 2, 2).write_bytes == 25 * 4);
}

TEST_CASE("Algorithm 1: K, V once, and Q, O, l, m read and O, l, m written for every (i, j)", "[io]") {
  const fs::Shape s{1, 1, 5, 4};
  // Non-causal: 3 key tiles × 5 query rows = 15 row visits.
  //   reads  K, V (40) + 15·(Q, O: 8 + l, m: 2) + finalize m, l (10) = 200
  //   writes init O, l, m (30) + 15·(O: 4 + l, m: 2) + LSE (5) = 125
  REQUIRE(fs::io_flash1_forward(s, false, 2, 2).read_bytes == 200 * 4);
  REQUIRE(fs::io_flash1_forward(s, false, 2, 2).write_bytes == 125 * 4);
  // Causal: key tile [2,4) skips query tile [0,2); key tile [4,5) skips [0,2) and [2,4): 9 row visits.
  REQUIRE(fs::io_flash1_forward(s, true, 2, 2).read_bytes == 140 * 4);
  REQUIRE(fs::io_flash1_forward(s, true, 2, 2).write_bytes == 89 * 4);
}

TEST_CASE("Algorithm 1 moves Θ(N²d²/M): quartering M roughly quadruples the Q/O traffic", "[io]") {
  const fs::Shape s{1, 1, 4096, 64};
  const auto big = fs::io_flash1_forward(s, false, 64, 256), small = fs::io_flash1_forward(s, false, 64, 64);
  REQUIRE(double(small.total()) / double(big.total()) == Approx(4.0).epsilon(0.05));
}

TEST_CASE("recomputation backward: the deterministic dQ re-reads K and V once per query tile", "[io]") {
  // d = 64: 64 keys per dK/dV CTA and 64 rows per dQ CTA, stages of 32.
  const fs::Shape s{1, 1, 128, 64};
  const fs::BwdTiles t = fs::backward_tiles(64);
  REQUIRE((t.keys == 64 && t.stage == 32));
  const std::int64_t N = 128, d = 64, f = 4;
  // Preprocess O, dO; per dK/dV CTA (2) K, V and per stage (4) Q, dO, LSE, D.
  const std::int64_t dkdv_reads = 2 * N * d + 2 * (2 * 64 * d + 4 * (2 * 32 * d + 2 * 32));
  const fs::IoCount atomic = fs::io_recompute_backward(s, false, true);
  REQUIRE(atomic.read_bytes == f * (dkdv_reads + 2 * 4 * 32 * d));      // + dQ read per (CTA, stage)
  REQUIRE(atomic.write_bytes == f * (N + N * d + 2 * 2 * 64 * d + 2 * 4 * 32 * d));  // D, dQ = 0, dK, dV, dQ adds
  const fs::IoCount det = fs::io_recompute_backward(s, false, false);
  // dQ kernel: per CTA (2) Q, dO, LSE, D once and K, V per stage (4).
  REQUIRE(det.read_bytes == f * (dkdv_reads + 2 * (2 * 64 * d + 2 * 64 + 4 * 2 * 32 * d)));
  REQUIRE(det.write_bytes == f * (N + 2 * 2 * 64 * d + N * d));
}

TEST_CASE("block-sparse: an all-ones mask moves what the dense steps move", "[io][sparse]") {
  const fs::StepInfo* dense_fwd = fs::find_step("04");
  const fs::StepInfo* dense_bwd = fs::find_step("05");
  const fs::StepInfo* sparse = fs::find_step("06");
  REQUIRE((dense_fwd && dense_bwd && sparse));
  for (int N : {1000, 4096}) {
    const fs::Shape s{2, 3, N, 64};
    const fs::BlockMask ones = fs::pattern_dense(N, sparse->mask_block(64));
    INFO("N = " << N);
    const fs::IoCount f1 = sparse->io_forward(s, {0.125f, false, 0, {}, &ones}),
                      f0 = dense_fwd->io_forward(s, {0.125f, false, 1});
    REQUIRE((f1.read_bytes == f0.read_bytes && f1.write_bytes == f0.write_bytes));
    for (int v : {0, 1}) {
      const fs::IoCount b1 = sparse->io_backward(s, {0.125f, false, v, {}, &ones}),
                        b0 = dense_bwd->io_backward(s, {0.125f, false, v});
      REQUIRE((b1.read_bytes == b0.read_bytes && b1.write_bytes == b0.write_bytes));
    }
  }
}

TEST_CASE("block-sparse IO: the tile term scales with the fraction s of nonzero blocks (Proposition 4)", "[io][sparse]") {
  // A random mask gives every block row exactly s·Tc blocks, so the K/V traffic of the forward
  // is exactly s times the dense one; Q, O and LSE (the Nd term) do not change.
  const fs::StepInfo* step = fs::find_step("06");
  REQUIRE(step);
  const fs::Shape s{1, 4, 4096, 64};
  const std::int64_t nd_reads = s.elems() * 4;  // Q once
  const fs::BlockMask ones = fs::pattern_dense(4096, 128);
  const fs::IoCount dense = step->io_forward(s, {0.125f, false, 0, {}, &ones});
  for (double density : {0.5, 0.25, 0.125, 0.0625}) {
    INFO("density " << density);
    const fs::BlockMask m = fs::make_pattern("random:" + std::to_string(density), 4096, 128, 3);
    REQUIRE(m.density() == density);
    const fs::IoCount io = step->io_forward(s, {0.125f, false, 0, {}, &m});
    REQUIRE(double(io.read_bytes - nd_reads) == density * double(dense.read_bytes - nd_reads));
    REQUIRE(io.write_bytes == dense.write_bytes);
  }
}

namespace {

// Whether query i sees key j under causal and a window (−1: unbounded), by the definition: both
// about query i's diagonal key i + δ, δ = Nk − N.
bool visible(std::int64_t i, std::int64_t j, std::int64_t delta, bool causal, int left, int right) {
  const std::int64_t diag = i + delta;
  return (!causal || j <= diag) && (left < 0 || j >= diag - left) && (right < 0 || j <= diag + right);
}
// Whether any query of [q0, q0 + nq) sees any key of [k0, k0 + nk), cut at N and Nk.
bool meets(const fs::Shape& s, std::int64_t q0, std::int64_t nq, std::int64_t k0, std::int64_t nk, bool causal,
           int left, int right) {
  for (std::int64_t i = q0; i < std::min<std::int64_t>(s.N, q0 + nq); ++i)
    for (std::int64_t j = k0; j < std::min<std::int64_t>(s.keys(), k0 + nk); ++j)
      if (visible(i, j, s.keys() - s.N, causal, left, right)) return true;
  return false;
}

}  // namespace

TEST_CASE("a sliding window, K and V of another length: the IO models count exactly the tiles holding a visible "
          "score",
          "[io][features]") {
  const int N = GENERATE(1, 37, 100, 257);
  const int keys = GENERATE(0, 1, 70, 300);
  const int Nk = keys > 0 ? keys : N;
  const int d = 64;
  fs::Shape s{1, 2, N, d};
  s.Nk = Nk;
  for (bool causal : {false, true})
    for (auto [left, right] : std::vector<std::pair<int, int>>{
             {-1, -1}, {0, 0}, {3, 5}, {40, -1}, {-1, 40}, {64, 0}, {100, 1}, {N, N}, {N - 1, 0}}) {
      INFO("N=" << N << " Nk=" << Nk << (causal ? " causal" : "") << " window " << left << "," << right);
      // Forward, Br × Bc tiles: Q and O once per query tile, K and V once per key tile it sees.
      const int Br = 16, Bc = 32;
      std::int64_t reads = 0;
      for (std::int64_t r0 = 0; r0 < N; r0 += Br) {
        const std::int64_t rows = std::min<std::int64_t>(Br, N - r0);
        reads += rows * d;
        for (std::int64_t j0 = 0; j0 < Nk; j0 += Bc)
          if (meets(s, r0, rows, j0, Bc, causal, left, right)) reads += 2 * std::min<std::int64_t>(Bc, Nk - j0) * d;
      }
      const fs::IoCount fwd = fs::io_flash2_forward(s, causal, Br, Bc, 4, left, right);
      REQUIRE(fwd.read_bytes == reads * 4 * s.heads());
      REQUIRE(fwd.write_bytes == (std::int64_t(N) * d + N) * 4 * s.heads());
      // Backward: the same walk with the tiles listed by the definition.
      const fs::BwdTiles t = fs::backward_tiles(d);
      auto query_tiles = [&](int key0, const fs::TileVisit& visit) {
        for (int i0 = 0; i0 < N; i0 += t.stage)
          if (meets(s, i0, t.stage, key0, t.keys, causal, left, right)) visit(i0);
      };
      auto key_tiles = [&](int row0, const fs::TileVisit& visit) {
        for (int j0 = 0; j0 < Nk; j0 += t.stage)
          if (meets(s, row0, t.keys, j0, t.stage, causal, left, right)) visit(j0);
      };
      for (bool atomic : {true, false}) {
        const fs::IoCount want = fs::io_backward_walk(s, atomic, t, query_tiles, key_tiles);
        const fs::IoCount got = fs::io_recompute_backward(s, causal, atomic, left, right);
        REQUIRE(got.read_bytes == want.read_bytes);
        REQUIRE(got.write_bytes == want.write_bytes);
      }
    }
}

TEST_CASE("grouped K/V heads: each query head's CTAs still load K and V in the forward, the backward reads K, V and "
          "writes dK, dV once per K/V head",
          "[io][features]") {
  const fs::Shape square{2, 4, 300, 64};
  fs::Shape grouped = square;
  grouped.Hkv = 1;  // multi-query: 2 K/V heads in all instead of 8
  for (bool causal : {false, true}) {
    REQUIRE(fs::io_flash2_forward(grouped, causal, 64, 64).total() == fs::io_flash2_forward(square, causal, 64, 64).total());
    for (bool atomic : {true, false}) {
      const fs::IoCount a = fs::io_recompute_backward(square, causal, atomic), b = fs::io_recompute_backward(grouped, causal, atomic);
      const std::int64_t fewer = (8 - 2) * 2 * std::int64_t(300) * 64 * 4;  // K and V (reads), dK and dV (writes)
      REQUIRE(b.read_bytes == a.read_bytes - fewer);
      REQUIRE(b.write_bytes == a.write_bytes - fewer);
    }
  }
}

TEST_CASE("a step's IO model takes a window longer than N as it is when there are more keys than queries",
          "[io][features]") {
  // N = 10 queries, Nk = 100 keys: query i's diagonal key is i + 90, and a reach of 50 keys to its
  // left is not the same window as one of 10 (the queries' count).
  fs::Shape s{1, 1, 10, 64};
  s.Nk = 100;
  fs::PassSettings settings;
  settings.features.window_left = 50;
  settings.features.window_right = 0;
  const fs::StepInfo& step = *fs::find_step("05");
  REQUIRE(step.io_backward(s, settings).total() == fs::io_recompute_backward(s, false, true, 50, 0).total());
  REQUIRE(step.io_backward(s, settings).total() != fs::io_recompute_backward(s, false, true, 10, 0).total());
  settings.features.window_left = 1 << 30;  // past every key: the same as unbounded
  REQUIRE(step.io_backward(s, settings).total() == fs::io_recompute_backward(s, false, true, -1, 0).total());
}

TEST_CASE("packed sequences: a pass's IO model is the sum of the step's on each sequence's own problem, and a sequence of "
          "no queries or no keys moves its outputs alone",
          "[io][varlen]") {
  fs::PassSettings settings;
  settings.packed = fs::parse_varlen("100,0,37:60,5:0,0:7,300:17");
  fs::Shape s{1, 4, settings.packed.cu_q.back(), 64, settings.packed.cu_k.back(), 2};
  const fs::Shape seqs[] = {{1, 4, 100, 64, 100, 2}, {1, 4, 37, 64, 60, 2}, {1, 4, 300, 64, 17, 2}};
  for (const char* id : {"05", "08"})
    for (const bool causal : {false, true})
      for (const int left : {-1, 40}) {
        const fs::StepInfo& step = *fs::find_step(id);
        settings.causal = causal;
        settings.dtype = step.takes(fs::DType::bf16) ? fs::DType::bf16 : fs::DType::fp32;
        settings.features.window_left = left;
        settings.features.window_right = left < 0 ? -1 : 3;
        fs::PassSettings plain = settings;
        plain.packed = {};
        const std::int64_t e = fs::dtype_bytes(settings.dtype);
        fs::IoCount fwd, bwd;
        for (const fs::Shape& one : seqs)
          for (auto [sum, hook] : {std::pair{&fwd, step.io_forward}, std::pair{&bwd, step.io_backward}}) {
            const fs::IoCount io = hook(one, plain);
            sum->read_bytes += io.read_bytes;
            sum->write_bytes += io.write_bytes;
          }
        fwd.write_bytes += 5 * 4 * (64 * e + 4);        // 5 queries of no keys: O = 0, LSE = −inf
        bwd.write_bytes += (5 * 4 + 2 * 7 * 2) * 64 * e;  // their dQ = 0; 7 keys of no queries: dK = dV = 0
        INFO(id << (causal ? " causal" : "") << " window " << left);
        const fs::IoCount got_fwd = fs::pass_io(step, s, settings, "fwd"), got_bwd = fs::pass_io(step, s, settings, "bwd");
        REQUIRE((got_fwd.read_bytes == fwd.read_bytes && got_fwd.write_bytes == fwd.write_bytes));
        REQUIRE((got_bwd.read_bytes == bwd.read_bytes && got_bwd.write_bytes == bwd.write_bytes));
        // One sequence packed is the problem unpacked.
        fs::PassSettings single = settings;
        single.packed = fs::parse_varlen("300:17");
        REQUIRE(fs::pass_io(step, seqs[2], single, "bwd").total() == step.io_backward(seqs[2], plain).total());
      }
}
