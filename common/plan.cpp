#include "common/plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <sstream>

#include "common/errors.hpp"
#include "common/files.hpp"
#include "common/harness.hpp"
#include "common/host_memory.hpp"
#include "common/npy.hpp"
#include "common/reference.hpp"
#include "common/traced_run.hpp"
#include "common/varlen.hpp"

namespace fs {

namespace {

void check_output(const std::string& option, const std::string& problem) {
  if (!problem.empty()) throw InputError(option + ": " + problem);
}

int mask_block(const StepInfo& step, const Options& opt) { return opt.block ? opt.block : step.mask_block(opt.shape.d); }

// Queries and keys of one sequence.
struct Lengths {
  int n, nk;
};

// The scores a window keeps of each sequence's n × n_k (causal: of those with j ≤ i + δ, δ = n_k − n,
// the diagonal aligned to the bottom-right corner), counted row by row over the sequences.
double window_fraction(const std::vector<Lengths>& sequences, bool causal, int left, int right) {
  double kept = 0, all = 0;
  for (const Lengths& seq : sequences)
    for (std::int64_t i = 0; i < seq.n; ++i) {
      const std::int64_t at = i + seq.nk - seq.n;  // the row's diagonal key
      const std::int64_t lo = left >= 0 ? std::max<std::int64_t>(0, at - left) : 0;
      const std::int64_t hi_all = causal ? std::min<std::int64_t>(at, seq.nk - 1) : seq.nk - 1;
      const std::int64_t hi = right >= 0 ? std::min(hi_all, at + right) : hi_all;
      kept += double(std::max<std::int64_t>(0, hi - lo + 1));
      all += double(std::max<std::int64_t>(0, hi_all + 1));
    }
  return all > 0 ? kept / all : 1.0;
}

std::string number_label(float x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

}  // namespace

void read_alibi_slopes(const std::string& path, int batches, int H, bool packed, ScoreFeatures& f) {
  const NpyRaw raw = read_npy_raw(path, {"<f4"}, "is not float32; save the slopes with slopes.astype(np.float32)");
  const std::vector<std::int64_t> heads{H}, rows{batches, H};
  if (raw.shape != heads && raw.shape != rows)
    throw InputError(path + ": shape " + shape_string(raw.shape) + ", but ALiBi takes one slope per head, " +
                     shape_string(heads) + ", or a row of them per " + (packed ? "packed sequence, " : "batch, ") +
                     shape_string(rows));
  f.alibi_slopes.resize(std::size_t(raw.elements()));
  f.alibi_batch_stride = raw.shape == heads ? 0 : H;  // (1, H) is a row per batch too: the same slopes
  for (std::size_t i = 0; i < f.alibi_slopes.size(); ++i) {
    f.alibi_slopes[i] = static_cast<float>(raw.value(std::int64_t(i)));
    if (!std::isfinite(f.alibi_slopes[i]))
      throw InputError(path + ": slope " +
                       (f.alibi_batch_stride ? "(" + std::to_string(i / H) + ", " + std::to_string(i % H) + ")"
                                             : std::to_string(i)) +
                       " is not finite");
  }
}

RunPlan::RunPlan(const StepInfo& step, const Options& opt) : step_(&step), opt_(opt) {
  // Outputs first: the cheapest mistake to make and the most annoying to find after the work.
  if (!opt.save_dir.empty()) check_output("--save " + opt.save_dir, output_dir_problem(opt.save_dir));
  if (!opt.csv_path.empty()) check_output("--csv " + opt.csv_path, output_file_problem(opt.csv_path));
  if (!opt.trace_path.empty()) {
    check_output("--trace " + opt.trace_path, output_file_problem(opt.trace_path));
    if (opt.backward) check_output("--trace", output_file_problem(backward_trace_path(opt.trace_path)));
  }

  const Shape& s = opt.shape;
  validate_shape(s);
  const std::string who = "step " + step.id;
  // Before anything is built head by head (--alibi's slopes of H heads): no step runs more.
  if (s.heads() > kMaxHeads)
    throw InputError(who + ": B·H must be at most " + std::to_string(kMaxHeads) +
                     " (the kernels' grids hold B·H CTAs in one dimension); got " + std::to_string(s.heads()));
  if (opt.backward && !step.backward) throw InputError(who + " has no backward pass");
  if (opt.dropout > 0.f && !step.dropout) throw InputError(who + " has no dropout");
  if (!step.takes(opt.dtype))
    throw InputError(who + " has no " + dtype_name(opt.dtype) + " kernel; steps with one: " +
                     (is_16bit(opt.dtype) ? kSteps16Bit : kStepsFp32));

  if (opt.packed.on()) {  // before the mask and the clusters, which are of one sequence
    if (!step.packed)
      throw InputError(who + " takes no packed sequences (--varlen); steps with them: " + kStepsPacked);
    if (step.block_sparse)
      throw InputError("--varlen: a block mask covers the whole N × N problem, not each sequence: " + who +
                       " takes no packed sequences");
    if (step.clustered)
      throw InputError("--varlen: SMYRF's clusters are of one sequence: " + who + " takes no packed sequences");
    if (!opt.trace_path.empty())
      throw InputError("--trace records no packed sequences (--varlen): the kernels record no traces of them yet");
    if (std::string why = packed_problem(opt.packed, s); !why.empty())
      throw InputError((opt.load_dir.empty() ? std::string("--varlen") : "--load " + opt.load_dir) + ": " + why);
  }
  // Host memory: Q, K, V (and dO), and what comes back to check or save (O, LSE; dQ, dK, dV).
  const std::uint64_t tensor = std::uint64_t(s.elems()) * sizeof(float), kv = std::uint64_t(s.kv_elems()) * sizeof(float);
  const std::uint64_t host = (tensor + kv) * (opt.backward ? 4 : 2) + std::uint64_t(s.rows()) * sizeof(float);
  require_host_memory(host, "B=" + std::to_string(s.B) + " H=" + std::to_string(s.H) + " N=" + std::to_string(s.N) +
                                " d=" + std::to_string(s.d) + " on the host");

  // The step's own check (StepInfo::refusal): for a block-sparse step on the mask its file holds,
  // or on a pattern's grid alone.
  BlockMask grid;
  if (step.block_sparse) {
    const int block = mask_block(step, opt);
    bool keeps_none = false;
    if (opt.mask_path.empty()) {
      const PatternGrid g = check_pattern(opt.pattern, s.N, block);
      grid.block_r = grid.block_c = block;
      grid.Tr = g.Tr;
      grid.Tc = g.Tc;
      keeps_none = g.no_block;
      require_host_memory(std::uint64_t(g.Tr) * std::uint64_t(g.Tc) * 2, "the block mask '" + opt.pattern + "'");
    } else {  // what the file holds: reading it costs what the file is
      mask_ = read_block_mask(opt.mask_path, s.N, block, block);
      keeps_none = to_lists(*mask_, opt.causal).nonzero() == 0;
    }
    if (keeps_none)
      throw InputError("the block mask keeps no block" + std::string(opt.causal ? " on or below the diagonal" : "") +
                       ": every query would attend to no key");
  }
  if (step.clustered) {
    // Options made without the command line (a test, the tour's traces) have no clustering:
    // the command line's default, the paper's 8 rounds of clusters of 32.
    if (!opt_.smyrf.on()) opt_.smyrf = kSmyrfDefault;
    if (!opt.load_dir.empty() && has_smyrf_clusters(opt.load_dir)) {
      clusters_ = read_smyrf_clusters(opt.load_dir, s);
      const SmyrfParams& given = opt.smyrf;
      const SmyrfGeometry& g = clusters_->geo;
      if (opt.smyrf_given && (given.hashes != clusters_->hashes || given.q_cluster != g.q_cluster ||
                              given.k_cluster != g.k_cluster))
        throw InputError("--load " + opt.load_dir + ": its clusters are " + std::to_string(clusters_->hashes) +
                         " rounds of " + std::to_string(g.q_cluster) + " queries × " + std::to_string(g.k_cluster) +
                         " keys, the options ask for " + std::to_string(given.hashes) + " of " +
                         std::to_string(given.q_cluster) + " × " + std::to_string(given.k_cluster) +
                         " (leave them out to use the files')");
      opt_.smyrf.hashes = clusters_->hashes;
      opt_.smyrf.q_cluster = g.q_cluster;
      opt_.smyrf.k_cluster = g.k_cluster;
    }
    if (std::string why = smyrf_params_error(s, opt_.smyrf); !why.empty()) throw InputError(who + ": " + why);
    // The clusters' orders: two int32 arrays of (B·H, hashes, N) on the host.
    require_host_memory(std::uint64_t(s.rows()) * std::uint64_t(opt_.smyrf.hashes) * 8, "the SMYRF clusters");
  }
  if (!s.square()) {
    if (!step.kv_shapes)
      throw InputError(who + " takes K and V of Q's length and heads only; steps with --seq-k and --heads-kv: " +
                       kStepsKvShapes);
    if (!opt.trace_path.empty())
      throw InputError("--trace records square problems only: a trace's tiles are of one length and head count");
  }
  if (opt.window_left >= 0 || opt.window_right >= 0 || opt.softcap > 0.f || opt.alibi) {
    if (!step.score_mods)
      throw InputError(who + " has no --window, --softcap or --alibi; steps with them: " + kStepsScoreMods);
    features_.window_left = opt.window_left;
    features_.window_right = opt.window_right;
    features_.softcap = opt.softcap;
    if (opt.alibi && opt.alibi_path.empty()) features_.alibi_slopes = alibi_slopes(s.H);
    if (opt.alibi && !opt.alibi_path.empty())
      read_alibi_slopes(opt.alibi_path, alibi_batches(s, opt.packed), s.H, opt.packed.on(), features_);
  }
  PassSettings checked{opt.effective_scale(),
                             opt.causal,
                             opt.variant,
                             opt.effective_dropout(),
                             !step.block_sparse ? nullptr : mask_ ? &*mask_ : &grid,
                             opt.dtype,
                             opt_.effective_smyrf(),
                             given_clusters()};
  checked.features = features_;
  checked.packed = opt.packed;
  if (std::string why = step.refusal(s, checked); !why.empty()) throw InputError(who + ": " + why);
  if (opt.backward)
    if (std::string why = step.backward_refusal(s, checked); !why.empty()) throw InputError(who + ": " + why);
  if (!opt.trace_path.empty())
    if (std::string why = step.trace_refusal(s, checked); !why.empty()) throw InputError("--trace: " + why);
}

const BlockMask* RunPlan::mask() const {
  if (step_->block_sparse && !mask_)
    mask_ = make_pattern(opt_.pattern, opt_.shape.N, mask_block(*step_, opt_), opt_.seed);
  return mask_ ? &*mask_ : nullptr;
}

PassSettings RunPlan::settings() const {
  PassSettings s{opt_.effective_scale(), opt_.causal,  opt_.variant,           opt_.effective_dropout(),
                 mask(),                 opt_.dtype,   opt_.effective_smyrf(), given_clusters()};
  s.features = features_;
  s.packed = opt_.packed;
  return s;
}

double RunPlan::density() const {
  if (mask()) return mask()->density();
  if (features_.windowed()) {
    const PackedSeqs& packed = opt_.packed;
    std::vector<Lengths> sequences{{opt_.shape.N, opt_.shape.N}};
    if (packed.on()) {
      sequences.clear();
      for (int b = 0; b < packed.count(); ++b) sequences.push_back({packed.queries(b), packed.keys(b)});
    }
    return window_fraction(sequences, opt_.causal, features_.window_left, features_.window_right);
  }
  if (!step_->clustered) return 1.0;
  // Every round, each cluster's queries × its keys, of the N × N scores.
  const SmyrfGeometry g = smyrf_geometry(opt_.shape.N, opt_.smyrf);
  double computed = 0;
  for (int c = 0; c < g.clusters(); ++c)
    computed += double(g.query_end(c) - g.query_begin(c)) * double(g.key_end(c) - g.key_begin(c));
  return opt_.smyrf.hashes * computed / (double(opt_.shape.N) * opt_.shape.N);
}

std::string RunPlan::mask_label() const {
  if (step_->clustered) return "smyrf:" + smyrf_spec(opt_.smyrf);  // "smyrf:8x32": rounds × cluster size
  const Shape& s = opt_.shape;
  if (features_.on() || !s.square() || opt_.packed.on()) {
    std::string label;
    auto add = [&](const std::string& part) { label += (label.empty() ? "" : "+") + part; };
    if (opt_.packed.on()) add("varlen:" + std::to_string(opt_.packed.count()));
    if (s.keys() != s.N) add("seq-k:" + std::to_string(s.keys()));
    if (s.kv_heads() != s.H) add("heads-kv:" + std::to_string(s.kv_heads()));
    if (features_.windowed())
      add("window:" + std::to_string(features_.window_left) + ":" + std::to_string(features_.window_right));
    if (features_.softcap > 0.f) add("softcap:" + number_label(features_.softcap));
    if (!features_.alibi_slopes.empty()) add("alibi");
    return label;
  }
  if (!step_->block_sparse) return {};
  return opt_.mask_path.empty() ? opt_.pattern : std::filesystem::path(opt_.mask_path).filename().string();
}

double RunPlan::flops(const std::string& pass) const {
  return pass == "fwd" ? forward_flops(opt_.shape, opt_.causal, opt_.packed)
                       : backward_flops(opt_.shape, opt_.causal, opt_.packed);
}

IoCount RunPlan::io(const std::string& pass) const { return pass_io(*step_, opt_.shape, settings(), pass); }

}  // namespace fs
