// The module's attention probabilities (flash_attn_func's S_dmask, return_attn_probs=True): the
// kernel of common/attn_probs.cuh on the CUDA tensors of a forward call, its q, k and LSE, written
// into a float32 tensor the caller gives. flashsteps/_ops.py makes it a PyTorch custom op
// (flashsteps::attention_probs), which flashsteps.attention_probs and flash_attn_interface call.
//
//   _probs(q, k, lse, out, causal=..., softmax_scale=..., window_size=..., softcap=..., alibi_slopes=...,
//          dropout_p=..., seed=..., cu_seqlens_q=..., cu_seqlens_k=..., stream=...)
//
// q (batch, seqlen_q, heads, head_dim), k (batch, seqlen_k, heads_k, head_dim) in any strides with
// the last dimension contiguous, of one dtype (bfloat16, float16, float32); lse float32 (batch,
// heads, seqlen_q) contiguous; out float32 (batch, heads, seqlen_q, seqlen_k) contiguous. With
// cu_seqlens_q, cu_seqlens_k (int32 CUDA prefix sums): q (total_q, heads, head_dim), k (total_k,
// heads_k, head_dim), lse (heads, total_q), and out (sequences, heads, rows, cols), flash_attn's
// varlen layout: sequence b's P in out[b, :, :its queries, :its keys], zero past them; rows and
// cols at least the longest sequence's (checked where the offsets are read back, which they are
// except while the stream is captured into a CUDA graph). out holds at most kMaxAttnProbs (2^28)
// entries. The keywords are the forward's, and must be the call's own for P to be its.
#include <cuda_runtime.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/attn_probs.hpp"
#include "common/check.hpp"
#include "common/python/dlpack_tensor.hpp"
#include "common/python/gpu_call.hpp"

namespace py = pybind11;

namespace {

using fs::python::Borrowed;
using fs::python::Operand;
using fs::python::shape_text;
using fs::python::type_error;
using fs::python::value_error;

bool is_float(const DLDataType& t, int bits) { return t.code == kDLFloat && t.bits == bits && t.lanes == 1; }

// A tensor of `want` dimensions, row-major contiguous (a dimension of one element may have any stride).
bool contiguous_as(const Borrowed& b, const std::vector<std::int64_t>& want) {
  if (b.ndim() != int(want.size())) return false;
  std::int64_t stride = 1;
  for (int i = b.ndim() - 1; i >= 0; --i) {
    if (b.dim(i) != want[std::size_t(i)]) return false;
    if (b.dim(i) > 1 && b.stride(i) != stride) return false;
    stride *= std::max<std::int64_t>(b.dim(i), 1);
  }
  return true;
}

void require_on(const Borrowed& b, int device) {
  if (b.t().device.device_type != kDLCUDA || b.t().device.device_id != device)
    value_error(std::string(b.name()) + ": a CUDA tensor on q's GPU");
}

// A cu_seqlens tensor as the kernel reads it: 1-D int32, contiguous, on q's GPU.
void require_offsets(const Operand& cu, int device) {
  const Borrowed& b = cu.t;
  const DLDataType t = b.t().dtype;
  if (b.ndim() != 1 || t.code != kDLInt || t.bits != 32 || t.lanes != 1 || (b.dim(0) > 1 && b.stride(0) != 1))
    type_error(std::string(b.name()) + ": expected a contiguous 1-D int32 tensor, got " + Borrowed::dtype_name(t) + " " +
               b.shape());
  require_on(b, device);
}

// Its offsets, copied back in the stream's order (the host waits).
std::vector<std::int32_t> offsets(const Operand& cu, cudaStream_t stream) {
  std::vector<std::int32_t> host(std::size_t(cu.t.dim(0)));
  if (host.empty()) return host;
  FS_CUDA_CHECK(cudaMemcpyAsync(host.data(), cu.data(), host.size() * 4, cudaMemcpyDeviceToHost, stream));
  FS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

using O = const py::object&;

void probs(O q_obj, O k_obj, O lse_obj, O out_obj, O causal, O scale, O window, O softcap, O alibi_obj, O dropout_p, O seed,
           O cu_q_obj, O cu_k_obj, O stream_obj) {
  const fs::python::Keywords kw = fs::python::keywords(dropout_p, scale, causal, window, softcap, seed);
  const std::int64_t stream = fs::python::integer(stream_obj, "stream", 0, std::numeric_limits<std::int64_t>::max());
  if (cu_q_obj.is_none() != cu_k_obj.is_none()) value_error("cu_seqlens_q and cu_seqlens_k go together");
  const bool packed = !cu_q_obj.is_none();
  const Operand q(q_obj, "q", stream), k(k_obj, "k", stream);
  const DLDataType qt = q.t.t().dtype, kt = k.t.t().dtype;
  if (!Borrowed::is_kernel_float(qt)) type_error("q: expected bfloat16, float16 or float32, got " + Borrowed::dtype_name(qt));
  if (!Borrowed::same_dtype(kt, qt)) type_error("q, k: one dtype for both");
  const fs::Shape s = fs::python::kernel_shape(q.t, k.t, packed);
  const std::int64_t N = s.N, H = s.H, d = s.d, Nk = s.keys(), Hk = s.kv_heads();
  auto dims = [&](std::int64_t rows, std::int64_t heads) {
    return packed ? std::vector<std::int64_t>{rows, heads, d} : std::vector<std::int64_t>{s.B, rows, heads, d};
  };
  q.expect(dims(N, H));
  k.expect(dims(Nk, Hk));
  const int device = q.t.t().device.device_id;
  require_on(k.t, device);
  const cudaStream_t cs = reinterpret_cast<cudaStream_t>(stream);
  const fs::python::OnDevice on(device);

  fs::ProbsParams p;
  p.q = q.data();
  p.k = k.data();
  p.dtype = q.t.kernel_dtype();
  p.shape = s;
  p.q_strides = q.strides();
  p.k_strides = k.strides();
  p.scale = kw.softmax_scale ? float(*kw.softmax_scale) : fs::default_scale(int(d));
  p.causal = kw.causal;
  p.dropout = fs::Dropout{float(kw.dropout_p), kw.seed};
  p.mods.window_left = fs::clamp_reach(int(kw.window_left), int(N), int(Nk));
  p.mods.window_right = fs::clamp_reach(int(kw.window_right), int(N), int(Nk));
  p.mods.softcap = float(kw.softcap);

  // Packed sequences: their count, and where the offsets are read back, their longest lengths.
  std::optional<Operand> cu_q, cu_k;
  std::int64_t batches = s.B, longest_q = N, longest_k = Nk;
  if (packed) {
    cu_q.emplace(cu_q_obj, "cu_seqlens_q", stream);
    cu_k.emplace(cu_k_obj, "cu_seqlens_k", stream);
    require_offsets(*cu_q, device);
    require_offsets(*cu_k, device);
    batches = cu_q->t.dim(0) - 1;
    if (fs::python::capturing(cs)) {  // the caller's word, as flash_attn takes it (flashsteps_gpu.cpp)
      longest_q = longest_k = 0;
      if (cu_k->t.dim(0) != batches + 1 || batches < 1)
        value_error("cu_seqlens_q, cu_seqlens_k: prefix sums of equal length (batch + 1), at least 2");
    } else {
      const std::vector<std::int32_t> hq = offsets(*cu_q, cs), hk = offsets(*cu_k, cs);
      fs::python::require_prefix_sums(hq, hk, N, Nk);
      longest_q = longest_k = 0;
      for (std::size_t b = 1; b < hq.size(); ++b) {
        longest_q = std::max<std::int64_t>(longest_q, hq[b] - hq[b - 1]);
        longest_k = std::max<std::int64_t>(longest_k, hk[b] - hk[b - 1]);
      }
    }
    if (batches > 65535) value_error("cu_seqlens: at most 65535 sequences");
  }

  // out: float32 (batches, H, rows, cols), contiguous, at most kMaxAttnProbs entries.
  const std::int64_t dl = fs::python::dlpack_stream(stream);
  const Borrowed out(out_obj, "out", &dl);
  require_on(out, device);
  if (out.ndim() != 4 || !is_float(out.t().dtype, 32))
    value_error("out: float32 (batch, heads, seqlen_q, seqlen_k); got " + Borrowed::dtype_name(out.t().dtype) + " " +
                out.shape());
  const std::int64_t rows = out.dim(2), cols = out.dim(3);
  if (!contiguous_as(out, {batches, H, packed ? rows : N, packed ? cols : Nk}))
    value_error(std::string("out: float32 ") + (packed ? "(sequences, heads, rows, cols) = " : "(batch, heads, seqlen_q, seqlen_k) = ") +
                shape_text({batches, H, packed ? rows : N, packed ? cols : Nk}) + ", contiguous; got " + out.shape());
  if (rows < longest_q || cols < longest_k)
    value_error("out: " + out.shape() + " has no room for the longest sequence's " + std::to_string(longest_q) +
                " queries and " + std::to_string(longest_k) + " keys");
  if (rows > std::numeric_limits<int>::max() || cols > std::numeric_limits<int>::max() ||
      double(batches) * double(H) * double(rows) * double(cols) > double(fs::kMaxAttnProbs))
    value_error("out: " + out.shape() + " is past the attention probabilities' limit of 2^28 = " +
                std::to_string(fs::kMaxAttnProbs) + " entries (batch·heads·seqlen_q·seqlen_k); they are for tests and small problems");
  p.p = reinterpret_cast<float*>(out.address());
  p.rows = int(rows);
  p.cols = int(cols);
  if (packed) {
    p.packed.cu_q = static_cast<const std::int32_t*>(cu_q->data());
    p.packed.cu_k = static_cast<const std::int32_t*>(cu_k->data());
    p.packed.count = int(batches);
    p.packed.max_q = int(rows);
    p.packed.max_k = int(cols);
  }

  // lse: float32 (batch, heads, seqlen_q), or (heads, total_q) packed, contiguous.
  const Borrowed lse(lse_obj, "lse", &dl);
  require_on(lse, device);
  const std::vector<std::int64_t> lse_dims = packed ? std::vector<std::int64_t>{H, N} : std::vector<std::int64_t>{s.B, H, N};
  if (!is_float(lse.t().dtype, 32) || !contiguous_as(lse, lse_dims))
    value_error(std::string("lse: float32 ") + (packed ? "(heads, total_q) = " : "(batch, heads, seqlen_q) = ") +
                shape_text(lse_dims) + ", contiguous (the forward's); got " + Borrowed::dtype_name(lse.t().dtype) + " " +
                lse.shape());
  p.lse = reinterpret_cast<const float*>(lse.address());

  // ALiBi's slopes: float32 (heads), or (batch, heads) — packed: (sequences, heads) —, contiguous.
  std::optional<Operand> alibi;
  if (!alibi_obj.is_none()) {
    alibi.emplace(alibi_obj, "alibi_slopes", stream);
    const Borrowed& a = alibi->t;
    const bool per_head = contiguous_as(a, {H}), per_batch = contiguous_as(a, {batches, H});
    if ((!per_head && !per_batch) || !is_float(a.t().dtype, 32))
      value_error("alibi_slopes: float32, contiguous, one slope per head, shape " + shape_text({H}) + ", or a row of them per " +
                  (packed ? "sequence, (sequences, heads) = " : "batch, (batch, heads) = ") + shape_text({batches, H}) +
                  "; got " + Borrowed::dtype_name(a.t().dtype) + " " + a.shape());
    require_on(a, device);
    p.mods.alibi_slopes = static_cast<const float*>(alibi->data());
    p.mods.alibi_batch_stride = per_head ? 0 : int(H);
  }

  fs::python::launched([&] { fs::launch_attn_probs(p, cs); });
}

}  // namespace

namespace fs::python {

void add_probs(py::module_& m) {
  m.def("_probs", &probs,
        "Writes the attention probabilities of a forward call into out (float32, (batch, heads, seqlen_q, seqlen_k);\n"
        "packed: (sequences, heads, rows, cols)) from its q, k and lse: P = exp(S - lse) with the call's masks, softcap\n"
        "and ALiBi, and the entries its dropout mask dropped negative. flashsteps.attention_probs is the interface.",
        py::arg("q"), py::arg("k"), py::arg("lse"), py::arg("out"), py::kw_only(), py::arg("causal") = false,
        py::arg("softmax_scale") = py::none(), py::arg("window_size") = py::make_tuple(-1, -1), py::arg("softcap") = 0.0,
        py::arg("alibi_slopes") = py::none(), py::arg("dropout_p") = 0.0, py::arg("seed") = 1,
        py::arg("cu_seqlens_q") = py::none(), py::arg("cu_seqlens_k") = py::none(), py::arg("stream") = 0);
  m.attr("_probs_limit") = py::int_(fs::kMaxAttnProbs);
}

}  // namespace fs::python
