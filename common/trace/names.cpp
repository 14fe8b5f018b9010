#include "common/trace/names.hpp"

#include <iterator>

namespace fs::trace {

namespace {

constexpr const char* kKindNames[] = {
    "load",         "store",        "compute_s",    "softmax",
    "rescale",      "accumulate_o", "compute_dp",   "compute_ds",
    "accumulate_dq", "accumulate_dk", "accumulate_dv", "skip",
    "wait",
};
static_assert(std::size(kKindNames) == kKindCount, "a name for every kind");

// Indexed by the Tensor value; "none" is never written to a file.
constexpr const char* kTensorNames[kTensorCount] = {
    "none", "Q", "K", "V", "O", "LSE", "S", "P", "dO", "dQ", "dK", "dV", "dP", "dS", "D", "m", "l", "dQacc",
    "order", "sort_key", "k_new", "v_new", "o_part", "lse_part",
};

}  // namespace

const char* kind_name(Kind k) {
  const auto i = static_cast<unsigned>(k);
  return valid_kind(i) ? kKindNames[i] : "unknown";
}

const char* tensor_name(Tensor t) {
  const auto i = static_cast<unsigned>(t);
  return valid_tensor(i) ? kTensorNames[i] : "unknown";
}

std::optional<Kind> kind_from_name(std::string_view name) {
  for (int i = 0; i < kKindCount; ++i)
    if (name == kKindNames[i]) return static_cast<Kind>(i);
  return std::nullopt;
}

std::string lane_name(const Trace& t, const Track& track) {
  if (track.kernel >= 0 && std::size_t(track.kernel) < t.kernels.size()) {
    const auto& names = t.kernels[std::size_t(track.kernel)].lane_names;
    if (track.lane >= 0 && std::size_t(track.lane) < names.size()) return names[std::size_t(track.lane)];
  }
  return "lane " + std::to_string(track.lane);
}

bool key_side(Tensor t) { return t == Tensor::K || t == Tensor::V || t == Tensor::dK || t == Tensor::dV; }

std::optional<Tensor> tensor_from_name(std::string_view name) {
  for (int i = 1; i < kTensorCount; ++i)
    if (name == kTensorNames[i]) return static_cast<Tensor>(i);
  return std::nullopt;
}

std::vector<std::int64_t> tensor_shape(Tensor t, int B, int H, int N, int d, int hashes) {
  switch (t) {
    case Tensor::None:
      return {};
    case Tensor::Order:
    case Tensor::SortKey:
      return {B, H, N, 2 * std::int64_t(hashes)};
    case Tensor::S:
    case Tensor::P:
    case Tensor::dP:
    case Tensor::dS:
      return {B, H, N, N};
    case Tensor::LSE:
    case Tensor::D:
    case Tensor::M:
    case Tensor::L:
      return {B, H, N};
    default:
      return {B, H, N, d};
  }
}

std::vector<std::int64_t> tensor_shape(Tensor t, const Meta& m) {
  const KvCache& c = m.cache;
  if (!c.on()) return tensor_shape(t, m.B, m.H, m.N, m.d, m.clusters.hashes);
  const std::int64_t splits = c.splits;
  switch (t) {
    case Tensor::K:
    case Tensor::V:
      return {1, c.heads_kv, c.slots, m.d};
    case Tensor::KNew:
    case Tensor::VNew:
      return {m.B, c.heads_kv, m.N, m.d};
    case Tensor::S:
      return {m.B, c.heads_kv, std::int64_t(m.H / c.heads_kv) * m.N, c.seqlen_cache};
    case Tensor::OPart:
      return {m.B, m.H, m.N * splits, m.d};
    case Tensor::LSEPart:
      return {m.B, m.H, m.N * splits};
    default:
      return tensor_shape(t, m.B, m.H, m.N, m.d, m.clusters.hashes);
  }
}

int element_bytes(Tensor t, const std::string& dtype) {
  if (t == Tensor::Order) return 4;
  if (t == Tensor::SortKey) return 8;
  const bool fp32 = t == Tensor::LSE || t == Tensor::D || t == Tensor::M || t == Tensor::L || t == Tensor::dQacc ||
                    t == Tensor::OPart || t == Tensor::LSEPart;
  return !fp32 && (dtype == "bf16" || dtype == "fp16") ? 2 : 4;
}

bool valid_dtype(const std::string& dtype) { return dtype == "fp32" || dtype == "bf16" || dtype == "fp16"; }

std::int64_t shape_elems(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

}  // namespace fs::trace
