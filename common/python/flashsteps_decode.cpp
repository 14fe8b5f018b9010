// Step 10 in the module: the kernel call behind flashsteps.attention_with_kvcache, on
// flash_attn_with_kvcache's tensors, read and written in place (the cache too, when new keys are
// appended):
//
//   _decode(q, k_cache, v_cache, out, lse, *, k=None, v=None, cache_seqlens=None, block_table=None,
//           cache_batch_idx=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False,
//           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
//           num_splits=0, stream=0, workspace=None)
//
// q, out (batch, seqlen_q, heads, d); k_cache, v_cache (batch_cache, seqlen_cache, heads_k, d), or
// paged (num_blocks, page_size, heads_k, d) with block_table (batch, max_blocks) int32; k, v
// (batch, seqlen_q, heads_k, d); cache_seqlens an int or (batch) int32; cache_batch_idx (batch)
// int32; rotary_cos, rotary_sin (rotary_len, rotary_dim / 2) of q's dtype; alibi_slopes (heads) or
// (batch, heads) float32; lse (batch, heads, seqlen_q) float32. Every tensor contiguous (step 10's kernels take no strides) and on q's GPU.
// The int32 tensors are read back (a few bytes, in the stream's order) and checked, so that no
// length, page or index sends the kernels outside the cache; the split rule then sees the longest
// sequence. Not while the stream is captured into a CUDA graph: then nothing is read back (see
// decode_call), and with workspace= (gpu_call.hpp's Workspace: flashsteps/_ops.py passes
// torch.empty's) the call queues kernels and nothing else. Bad input raises ValueError or TypeError
// with one line.
#include <cuda_runtime.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/check.hpp"
#include "common/python/arguments.hpp"
#include "common/python/dlpack_tensor.hpp"
#include "common/python/gpu_call.hpp"
#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/split_rule.hpp"

namespace py = pybind11;

namespace {

using fs::python::Borrowed;
using fs::python::Operand;
using O = const py::object&;

// A tensor of the call with these dims, row-major contiguous, on q's GPU.
void expect_dense(const Operand& o, const std::vector<std::int64_t>& dims, int device) {
  o.expect(dims);
  std::int64_t want = 1;
  for (int i = o.t.ndim() - 1; i >= 0; --i) {
    if (o.t.dim(i) > 1 && o.t.stride(i) != want)
      throw py::value_error(std::string(o.t.name()) + ": a contiguous tensor (step 10's kernels take no strides; pass "
                                                      ".contiguous()); got strides that are not row-major");
    want *= o.t.dim(i);
  }
  if (o.t.t().device.device_id != device) throw py::value_error(std::string(o.t.name()) + ": on q's GPU");
}

bool same_dtype(const Operand& a, const Operand& b) {
  return a.t.t().dtype.code == b.t.t().dtype.code && a.t.t().dtype.bits == b.t.t().dtype.bits;
}

// An int32 tensor of these dims (contiguous, on q's GPU), read back in the stream's order; while the
// stream is captured into a CUDA graph (`read` false) its layout alone is checked and nothing is read.
std::vector<std::int32_t> int32_values(const Operand& o, const std::vector<std::int64_t>& dims, int device,
                                       cudaStream_t stream, bool read = true) {
  const DLDataType t = o.t.t().dtype;
  if (t.code != kDLInt || t.bits != 32 || t.lanes != 1)
    throw py::type_error(std::string(o.t.name()) + ": int32, got " + Borrowed::dtype_name(t));
  expect_dense(o, dims, device);
  if (!read) return {};
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  std::vector<std::int32_t> host(static_cast<std::size_t>(n));
  if (n > 0) {
    FS_CUDA_CHECK(cudaMemcpyAsync(host.data(), o.data(), host.size() * 4, cudaMemcpyDeviceToHost, stream));
    FS_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  return host;
}

std::int64_t dim_of(const Operand& o, int i, int ndim) {
  if (o.t.ndim() != ndim)
    throw py::value_error(std::string(o.t.name()) + ": " + std::to_string(ndim) + " dimensions, got shape " + o.t.shape());
  return o.t.dim(i);
}

int as_int(std::int64_t x, const char* what) {
  if (x < 1 || x > std::numeric_limits<int>::max())
    throw py::value_error(std::string(what) + " must be in 1.." + std::to_string(std::numeric_limits<int>::max()) +
                          "; got " + std::to_string(x));
  return int(x);
}

void decode_call(O q_obj, O kc_obj, O vc_obj, O out_obj, O lse_obj, O k_obj, O v_obj, O seqlens_obj, O table_obj, O idx_obj,
            O cos_obj, O sin_obj, O interleaved, O scale_obj, O causal, O window_obj, O softcap_obj, O alibi_obj,
            O splits_obj, O stream_obj, O workspace_obj) {
  const std::int64_t stream = fs::python::integer(stream_obj, "stream", 0, std::numeric_limits<std::int64_t>::max());
  const cudaStream_t cs = reinterpret_cast<cudaStream_t>(stream);
  const Operand q(q_obj, "q", stream), kc(kc_obj, "k_cache", stream), vc(vc_obj, "v_cache", stream);
  const Operand out(out_obj, "out", stream);
  const int dev = q.t.t().device.device_id;
  const fs::DType dtype = q.t.kernel_dtype();
  if (dtype != fs::DType::bf16 && dtype != fs::DType::fp16)
    throw py::type_error("q: step 10 takes bfloat16 or float16, not " + Borrowed::dtype_name(q.t.t().dtype));

  fs::decoding::DecodeShape s;
  s.batch = as_int(dim_of(q, 0, 4), "batch");
  s.new_tokens = as_int(q.t.dim(1), "seqlen_q");
  s.heads = as_int(q.t.dim(2), "heads");
  s.d = as_int(q.t.dim(3), "head_dim");
  s.heads_kv = as_int(dim_of(kc, 2, 4), "heads_k");
  const bool paged = !table_obj.is_none();
  std::optional<Operand> table, idx, seqlens, k_new, v_new, rot_cos, rot_sin;
  if (paged) table.emplace(table_obj, "block_table", stream);
  if (!idx_obj.is_none()) idx.emplace(idx_obj, "cache_batch_idx", stream);
  if (paged && idx) throw py::value_error("cache_batch_idx picks sequences of a contiguous cache; a paged cache's are "
                                          "its block table's rows");
  const fs::python::OnDevice on(dev);
  // A CUDA graph being captured: the host may not wait for the int32 tensors, and a graph replays
  // whatever they hold then (a decoding loop's lengths grow between replays), so they are not read
  // back: their entries are the caller's word, as flash_attn takes them (lengths within the cache,
  // pages and indices within it; the append kernel writes no row past seqlen_cache either way),
  // and the split rule sees the cache's room instead of the longest length.
  const bool read = !fs::python::capturing(cs);
  fs::decoding::DecodeParams p;
  std::vector<std::int32_t> table_host, idx_host;
  std::int64_t batch_cache = s.batch, num_blocks = 0;
  if (paged) {
    const int max_blocks = as_int(dim_of(*table, 1, 2), "block_table's second dimension");
    num_blocks = kc.t.dim(0);
    p.page_size = as_int(kc.t.dim(1), "page_size");
    s.seqlen_cache = as_int(std::int64_t(max_blocks) * p.page_size, "max_blocks_per_seq * page_size");
    table_host = int32_values(*table, {s.batch, max_blocks}, dev, cs, read);
    for (std::int32_t b : table_host)
      if (b < 0 || b >= num_blocks)
        throw py::value_error("block_table: an entry " + std::to_string(b) + " outside the cache's " +
                              std::to_string(num_blocks) + " blocks");
    p.block_table = static_cast<const std::int32_t*>(table->data());
    p.max_blocks_per_seq = max_blocks;
  } else {
    batch_cache = kc.t.dim(0);
    s.seqlen_cache = as_int(kc.t.dim(1), "seqlen_cache");
    if (idx) {
      idx_host = int32_values(*idx, {s.batch}, dev, cs, read);
      for (std::int32_t b : idx_host)
        if (b < 0 || b >= batch_cache)
          throw py::value_error("cache_batch_idx: an index " + std::to_string(b) + " outside the cache's " +
                                std::to_string(batch_cache) + " sequences");
      p.cache_batch_idx = static_cast<const std::int32_t*>(idx->data());
    } else if (batch_cache != s.batch) {
      throw py::value_error("k_cache: " + std::to_string(batch_cache) + " sequences for a batch of " +
                            std::to_string(s.batch) + " (without cache_batch_idx, one each)");
    }
  }
  const std::vector<std::int64_t> cache_dims = {paged ? num_blocks : batch_cache, paged ? p.page_size : s.seqlen_cache,
                                                s.heads_kv, s.d};
  expect_dense(q, {s.batch, s.new_tokens, s.heads, s.d}, dev);
  expect_dense(out, {s.batch, s.new_tokens, s.heads, s.d}, dev);
  expect_dense(kc, cache_dims, dev);
  expect_dense(vc, cache_dims, dev);
  for (const Operand* o : {&kc, &vc, &out})
    if (!same_dtype(*o, q)) throw py::type_error(std::string(o->t.name()) + ": q's dtype");
  const std::int64_t dl = fs::python::dlpack_stream(stream);
  const Borrowed lse(lse_obj, "lse", &dl);
  {
    const DLDataType t = lse.t().dtype;
    const bool ok = lse.ndim() == 3 && lse.dim(0) == s.batch && lse.dim(1) == s.heads && lse.dim(2) == s.new_tokens &&
                    t.code == kDLFloat && t.bits == 32 && (s.new_tokens < 2 || lse.stride(2) == 1) &&
                    (s.heads < 2 || lse.stride(1) == s.new_tokens) &&
                    (s.batch < 2 || lse.stride(0) == std::int64_t(s.heads) * s.new_tokens) &&
                    lse.t().device.device_type == kDLCUDA && lse.t().device.device_id == dev;
    if (!ok)
      throw py::value_error("lse: float32 (batch, heads, seqlen_q) = (" + std::to_string(s.batch) + ", " +
                            std::to_string(s.heads) + ", " + std::to_string(s.new_tokens) + "), contiguous, on q's GPU; got " +
                            Borrowed::dtype_name(t) + " " + lse.shape());
  }

  // The lengths: an int for every sequence, or one per sequence (read back and checked).
  std::vector<std::int32_t> lens;
  if (seqlens_obj.is_none()) {
    p.cache_len = s.seqlen_cache;
  } else if (!py::hasattr(seqlens_obj, "__dlpack__")) {  // an int (a tensor has __index__ too: tested first)
    p.cache_len = int(fs::python::integer(seqlens_obj, "cache_seqlens", 0, s.seqlen_cache));
  } else {
    seqlens.emplace(seqlens_obj, "cache_seqlens", stream);
    lens = int32_values(*seqlens, {s.batch}, dev, cs, read);
    for (std::int32_t L : lens)
      if (L < 0 || L > s.seqlen_cache)
        throw py::value_error("cache_seqlens: a length " + std::to_string(L) + " outside 0.." +
                              std::to_string(s.seqlen_cache));
    p.cache_seqlens = static_cast<const std::int32_t*>(seqlens->data());
  }
  const bool lens_unread = seqlens.has_value() && !read;  // the lengths on the device only
  const int longest = lens_unread ? s.seqlen_cache : lens.empty() ? p.cache_len : *std::max_element(lens.begin(), lens.end());

  if (k_obj.is_none() != v_obj.is_none()) throw py::value_error("k and v (the new tokens' keys and values) go together");
  if (!k_obj.is_none()) {
    k_new.emplace(k_obj, "k", stream);
    v_new.emplace(v_obj, "v", stream);
    for (const Operand* o : {&*k_new, &*v_new}) {
      expect_dense(*o, {s.batch, s.new_tokens, s.heads_kv, s.d}, dev);
      if (!same_dtype(*o, q)) throw py::type_error(std::string(o->t.name()) + ": q's dtype");
    }
    const std::string why =
        lens_unread ? "" : fs::decoding::append_unsupported(s, lens.empty() ? nullptr : lens.data(), p.cache_len);
    if (!why.empty()) throw py::value_error(why);
    p.k_new = k_new->data();
    p.v_new = v_new->data();
  }
  if (cos_obj.is_none() != sin_obj.is_none()) throw py::value_error("rotary_cos and rotary_sin go together");
  if (!cos_obj.is_none()) {
    rot_cos.emplace(cos_obj, "rotary_cos", stream);
    rot_sin.emplace(sin_obj, "rotary_sin", stream);
    const std::int64_t len = dim_of(*rot_cos, 0, 2), half = rot_cos->t.dim(1);
    for (const Operand* o : {&*rot_cos, &*rot_sin}) {
      expect_dense(*o, {len, half}, dev);
      if (!same_dtype(*o, q)) throw py::type_error(std::string(o->t.name()) + ": q's dtype");
    }
    p.rotary_cos = rot_cos->data();
    p.rotary_sin = rot_sin->data();
    p.rotary_dim = int(std::min<std::int64_t>(2 * half, std::numeric_limits<int>::max()));
    p.rotary_len = int(std::min<std::int64_t>(len, std::numeric_limits<int>::max()));
    p.rotary_interleaved = fs::python::flag(interleaved);
    if (!lens_unread && longest + std::int64_t(s.new_tokens) > p.rotary_len)  // unread: the kernels clamp
      throw py::value_error("rotary_cos: " + std::to_string(p.rotary_len) + " positions; the last new token's is " +
                            std::to_string(longest + s.new_tokens - 1));
  }

  const int splits_given = int(fs::python::integer(splits_obj, "num_splits", 0, fs::decoding::kMaxSplits));
  int sms = 0;
  FS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int keys = longest + (p.k_new ? s.new_tokens : 0);
  p.num_splits = splits_given > 0 ? splits_given : fs::decoding::num_splits(s.batch, s.heads_kv, keys, sms, s.row_blocks());
  const std::optional<double> scale = fs::python::optional_number(scale_obj, "softmax_scale");
  if (scale && !(*scale > 0.0)) throw py::value_error("softmax_scale must be positive");
  p.scale = scale ? float(*scale) : fs::default_scale(s.d);
  p.causal = fs::python::flag(causal);
  const auto [left, right] = fs::python::window(window_obj);
  if (left < -1 || right < -1 || left > std::numeric_limits<int>::max() || right > std::numeric_limits<int>::max())
    throw py::value_error("window_size: each side -1 (unbounded) or 0 and more");
  p.mods.window_left = int(left);
  p.mods.window_right = int(right);
  const double cap = fs::python::number(softcap_obj, "softcap");
  if (!(cap >= 0.0 && cap < 1e30)) throw py::value_error("softcap: 0 (off) or a positive finite number");
  p.mods.softcap = float(cap);
  std::optional<Operand> alibi;
  if (!alibi_obj.is_none()) {
    alibi.emplace(alibi_obj, "alibi_slopes", stream);
    const DLDataType t = alibi->t.t().dtype;
    if (t.code != kDLFloat || t.bits != 32) throw py::type_error("alibi_slopes: float32, got " + Borrowed::dtype_name(t));
    // (heads), one slope per head; or (batch, heads), a row per sequence of the batch (q's, which
    // cache_batch_idx does not reorder).
    const Borrowed& a = alibi->t;
    const bool per_batch = a.ndim() == 2 && a.dim(0) == s.batch && a.dim(1) == s.heads;
    if (!per_batch && !(a.ndim() == 1 && a.dim(0) == s.heads))
      throw py::value_error("alibi_slopes: one slope per head, shape " + fs::python::shape_text({s.heads}) +
                            ", or a row of them per batch, (batch, heads) = " +
                            fs::python::shape_text({s.batch, s.heads}) + "; got " + a.shape());
    expect_dense(*alibi, per_batch ? std::vector<std::int64_t>{s.batch, s.heads} : std::vector<std::int64_t>{s.heads}, dev);
    p.mods.alibi_slopes = static_cast<const float*>(alibi->data());
    p.mods.alibi_batch_stride = per_batch ? s.heads : 0;
  }
  p.q = q.data();
  p.k_cache = kc.data();
  p.v_cache = vc.data();
  p.o = out.data();
  p.lse = reinterpret_cast<float*>(lse.address());
  p.dtype = dtype;
  p.shape = s;
  p.stream = cs;
  if (std::string why = fs::decoding::decode_unsupported(s, dtype, p.num_splits); !why.empty()) throw py::value_error(why);
  const fs::python::Workspace ws(fs::decoding::decode_workspace_bytes(s, p.num_splits, p.rotary_dim > 0), stream,
                                 workspace_obj, dev);
  p.workspace = static_cast<float*>(ws.get());
  fs::python::launched([&] { fs::decoding::decode_forward(p); });
}

}  // namespace

namespace fs::python {

void add_decode(py::module_& m) {
  m.def("_decode", &decode_call,
        "Launches step 10 (decoding) on flash_attn_with_kvcache's CUDA tensors in place: out (like q) and lse\n"
        "(batch, heads, seqlen_q) float32 are written, and with k, v the cache. flashsteps.attention_with_kvcache is\n"
        "the interface; this is its kernel call.",
        py::arg("q"), py::arg("k_cache"), py::arg("v_cache"), py::arg("out"), py::arg("lse"), py::kw_only(),
        py::arg("k") = py::none(), py::arg("v") = py::none(), py::arg("cache_seqlens") = py::none(),
        py::arg("block_table") = py::none(), py::arg("cache_batch_idx") = py::none(), py::arg("rotary_cos") = py::none(),
        py::arg("rotary_sin") = py::none(), py::arg("rotary_interleaved") = false, py::arg("softmax_scale") = py::none(),
        py::arg("causal") = false, py::arg("window_size") = py::make_tuple(-1, -1), py::arg("softcap") = 0.0,
        py::arg("alibi_slopes") = py::none(), py::arg("num_splits") = 0, py::arg("stream") = 0,
        py::arg("workspace") = py::none());
}

}  // namespace fs::python
