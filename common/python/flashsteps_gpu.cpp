// The module's kernels: a step's forward and backward launchers (steps 04, 05 and 08) on CUDA
// tensors that speak DLPack, read and written in place. flashsteps/_ops.py makes them PyTorch custom
// ops (flashsteps::attention_forward, attention_backward), which flashsteps.attention calls:
//
//   _forward(q, k, v, out, lse, step=..., variant=..., ...)                  out, lse written
//   _backward(q, k, v, out, lse, dout, dq, dk, dv, step=..., variant=..., ...)  dq, dk, dv written
//
// q, out, dout, dq are (batch, seqlen_q, heads, head_dim) and k, v, dk, dv (batch, seqlen_k,
// heads_k, head_dim), in any strides with the last dimension contiguous; lse is (batch, heads,
// seqlen_q) float32, contiguous. With cu_seqlens_q and cu_seqlens_k (flash_attn_varlen_func's packed
// sequences, int32 CUDA tensors of batch + 1 prefix sums) q, out, dout, dq are (total_q, heads,
// head_dim), k, v, dk, dv (total_k, heads_k, head_dim) and lse (heads, total_q); the offsets are read
// back to be checked (a wrong one would send the kernels outside the tensors) and to size the grid by
// the longest sequence, except while the stream is captured into a CUDA graph (prepare). The kernels
// of steps 04, 05 and 08 take those strides as they are (StepInfo::strides). Bad shapes, dtypes,
// devices and layouts raise ValueError or TypeError with one line; nothing is copied here.
//
// workspace=: a callable taking a byte count and returning a CUDA tensor of that many bytes, for the
// memory a pass needs beside its tensors (gpu_call.hpp's Workspace): flashsteps/_ops.py passes
// torch.empty's, so that nothing is allocated outside PyTorch's allocator. Together with the offsets
// left unread while the stream is captured (prepare), a call then queues kernels on `stream` and
// nothing else, which is what capturing it into a CUDA graph needs.
#include <cuda_runtime.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/check.hpp"
#include "common/python/dlpack_tensor.hpp"
#include "common/python/gpu_call.hpp"
#include "steps/registry.hpp"

namespace py = pybind11;

namespace {

using fs::python::Borrowed;
using fs::python::dlpack_stream;
using fs::python::launched;
using fs::python::OnDevice;
using fs::python::Operand;
using fs::python::Workspace;

// The addresses the last launch was given, by tensor name: the tests compare them with the
// callers' tensors to show that nothing was copied. (Plain C++: a Python object here would be
// released after the interpreter has gone.)
std::vector<std::pair<std::string, std::uintptr_t>> g_last_launch;
// The step and variant the last _forward or _backward ran ("09_hopper/fa3"): what step "auto" chose.
std::string g_last_step;

// One CUDA tensor of the call, checked: on `device`, of a 16- or 32-bit float type, its four
// dimensions those expected, its last one contiguous. Its strides, in the kernels' terms.
// The run: the step, its variant, the shape and settings, on the tensors' device and stream.
struct Launch {
  const fs::StepInfo* step = nullptr;
  fs::Shape shape;
  fs::PassSettings settings;
  fs::ScoreMods mods;
  bool varlen = false;  // packed sequences (cu_seqlens): the tensors are (tokens, heads, head_dim)
  fs::Packed packed;    // and these their device offsets, count and longest lengths
  cudaStream_t stream = nullptr;
  int device = 0;

  // A tensor's expected shape: (batch, rows, heads, head_dim), or (rows, heads, head_dim) packed.
  std::vector<std::int64_t> dims(std::int64_t rows, std::int64_t heads) const {
    if (varlen) return {rows, heads, shape.d};
    return {shape.B, rows, heads, shape.d};
  }

  // The settings of FwdParams or BwdParams `p`, beside its tensors.
  template <class Params>
  void into(Params& p, void* workspace) const {
    p.dtype = settings.dtype;
    p.shape = shape;
    p.scale = settings.scale;
    p.causal = settings.causal;
    p.variant = settings.variant;
    p.dropout = settings.dropout;
    p.mods = mods;
    p.packed = packed;
    p.workspace = workspace;
    p.stream = stream;
  }
};

// Packed sequences: cu_seqlens_q and cu_seqlens_k (both or neither) and the longest lengths the
// caller names (flash_attn_varlen_func's max_seqlen_q, max_seqlen_k; none: found here).
struct VarlenArgs {
  std::optional<Operand> cu_q, cu_k;
  std::optional<int> max_q, max_k;
  VarlenArgs(const py::object& q, const py::object& k, std::optional<int> mq, std::optional<int> mk, std::int64_t stream)
      : max_q(mq), max_k(mk) {
    if (q.is_none() != k.is_none()) throw py::value_error("cu_seqlens_q and cu_seqlens_k go together");
    if (q.is_none()) return;
    cu_q.emplace(q, "cu_seqlens_q", stream);
    cu_k.emplace(k, "cu_seqlens_k", stream);
  }
  bool on() const { return cu_q.has_value(); }
};

// A cu_seqlens tensor as the kernels read it: 1-D int32, contiguous, on q's GPU.
void require_offsets_layout(const Operand& cu, int device) {
  const Borrowed& b = cu.t;
  const DLDataType t = b.t().dtype;
  if (b.ndim() != 1 || t.code != kDLInt || t.bits != 32 || t.lanes != 1 || (b.dim(0) > 1 && b.stride(0) != 1))
    throw py::type_error(std::string(b.name()) + ": expected a contiguous 1-D int32 tensor, got " + Borrowed::dtype_name(t) +
                         " " + b.shape());
  if (b.t().device.device_id != device) throw py::value_error(std::string(b.name()) + ": on q's GPU");
}

// The offsets of a cu_seqlens tensor, copied back in the launch stream's order (the host waits).
std::vector<std::int32_t> offsets(const Operand& cu, cudaStream_t stream) {
  const Borrowed& b = cu.t;
  std::vector<std::int32_t> host(b.dim(0));
  FS_CUDA_CHECK(cudaMemcpyAsync(host.data(), cu.data(), host.size() * 4, cudaMemcpyDeviceToHost, stream));
  FS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

// The longest sequence of a prefix sum, checked against the caller's max_seqlen when given.
int longest(const std::vector<std::int32_t>& cu, std::optional<int> given, const char* name) {
  int most = 0;
  for (std::size_t i = 1; i < cu.size(); ++i) most = std::max(most, cu[i] - cu[i - 1]);
  if (given && *given < most)
    throw py::value_error(std::string(name) + " = " + std::to_string(*given) + " is less than the longest sequence (" +
                          std::to_string(most) + ")");
  return most;
}

Launch prepare_step(const Operand& q, const Operand& k, const Operand& v, const std::string& step_id,
                    const std::string& variant, const fs::python::Keywords& kw, const std::optional<Operand>& alibi,
                    const VarlenArgs& varlen, std::int64_t stream, bool with_backward);

// Whether GPU `device` runs step 09's kernels (sm_90a: an H100 or H200) and this build has them.
bool hopper_device(int device) {
  if (!fs::find_step("09")) return false;
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();  // not this call's error to keep
    return false;
  }
  return major == 9 && minor == 0;
}

// The run of a call. step "auto" (flashsteps.attention's default for 16-bit tensors): step 09 where
// it takes the call on this GPU (sm_90; bf16 or fp16; its head dimensions; no K/V shape of its own,
// window, softcap, ALiBi, dropout or packed sequences) forward and backward alike, so that a
// backward never meets a refusal its forward did not; step 08 otherwise. Variant "default" or
// "deterministic", which each step names its own way. The choice depends on the call's tensors'
// shapes and settings and the GPU alone, so the backward (whose call repeats them) makes the same.
Launch prepare(const Operand& q, const Operand& k, const Operand& v, const std::string& step_id,
               const std::string& variant, const fs::python::Keywords& kw, const std::optional<Operand>& alibi,
               const VarlenArgs& varlen, std::int64_t stream) {
  if (step_id != "auto") return prepare_step(q, k, v, step_id, variant, kw, alibi, varlen, stream, false);
  if (variant != "default" && variant != "deterministic")
    throw py::value_error("variant: '" + variant + "'; step 'auto' takes 'default' or 'deterministic'");
  const bool deterministic = variant == "deterministic";
  if (hopper_device(q.t.t().device.device_id) && !varlen.on()) {
    try {
      return prepare_step(q, k, v, "09", deterministic ? "deterministic" : "fa3", kw, alibi, varlen, stream, true);
    } catch (const py::value_error&) {  // a refusal: step 08 takes it (or says why not)
    } catch (const py::type_error&) {
    }
  }
  return prepare_step(q, k, v, "08", deterministic ? "deterministic" : "fa2", kw, alibi, varlen, stream, false);
}

// One step's run. with_backward: its backward must take the call too (step "auto"'s choice).
Launch prepare_step(const Operand& q, const Operand& k, const Operand& v, const std::string& step_id,
                    const std::string& variant, const fs::python::Keywords& kw, const std::optional<Operand>& alibi,
                    const VarlenArgs& varlen, std::int64_t stream, bool with_backward) {
  Launch L;
  // The flash steps, whose kernels take these tensors in any layout; the others keep state
  // between passes or need inputs this interface has not.
  L.step = fs::find_step(step_id);
  const std::string id = L.step ? L.step->id.substr(0, 2) : "";
  if (id != "04" && id != "05" && id != "08" && id != "09")
    throw py::value_error("step: '" + step_id + "'; the kernels run here are steps 04 (forward), 05, 08 and 09 "
                          "(where this build has them), or 'auto'");
  if (!L.step->strides) throw std::logic_error("step " + L.step->id + " takes no strides, which this module passes");
  // Every dimension at least 1 and an int, H a multiple of H_k (K/V of zero heads divided by 0).
  const fs::Shape checked = fs::python::kernel_shape(q.t, k.t, varlen.on());
  const std::int64_t N = checked.N, H = checked.H, d = checked.d, Nk = checked.keys(), Hk = checked.kv_heads();
  L.shape = fs::Shape{checked.B, checked.H, checked.N, checked.d};
  L.varlen = varlen.on();
  q.expect(L.dims(N, H));
  k.expect(L.dims(Nk, Hk));
  v.expect(L.dims(Nk, Hk));
  // float32, float16 or bfloat16, one for all three (kernel_dtype names any 16-bit code float16 and
  // anything else float32: float64 or integer data would be read as float32 otherwise).
  const DLDataType qd = q.t.t().dtype;
  using fs::python::TensorArg;
  if (!TensorArg::is_kernel_float(qd))
    throw py::type_error("q: " + TensorArg::dtype_name(qd) + "; the kernels take float32, float16 or bfloat16");
  const fs::DType dtype = q.t.kernel_dtype();
  for (const Operand* o : {&k, &v})
    if (!TensorArg::same_dtype(o->t.t().dtype, qd)) throw py::type_error("q, k, v: one dtype for all three");
  if (!L.step->takes(dtype)) {
    std::string names;
    for (fs::DType t : L.step->dtypes) names += (names.empty() ? "" : " or ") + std::string(fs::dtype_name(t));
    throw py::type_error("step " + L.step->id + " takes " + names + ", not " + fs::dtype_name(dtype));
  }
  const int dev = q.t.t().device.device_id;
  for (const Operand* o : {&k, &v})
    if (o->t.t().device.device_id != dev) throw py::value_error("q, k, v: all on one GPU");
  int variant_index = -1;
  for (std::size_t i = 0; i < L.step->variants.size(); ++i)
    if (L.step->variants[i] == variant) variant_index = int(i);
  if (variant_index < 0) {
    std::string names;
    for (const auto& n : L.step->variants) names += (names.empty() ? "" : ", ") + n;
    throw py::value_error("variant: '" + variant + "' is not one of step " + L.step->id + "'s (" + names + ")");
  }
  const double scale = kw.softmax_scale ? *kw.softmax_scale : double(fs::default_scale(int(d)));  // kw: checked

  if (Nk != N) L.shape.Nk = int(Nk);
  if (Hk != H) L.shape.Hkv = int(Hk);
  L.settings = fs::PassSettings(float(scale), kw.causal, variant_index, fs::Dropout{float(kw.dropout_p), kw.seed}, nullptr, dtype);
  // A reach wider than max(N, Nk) sees no more keys, and would overflow a query's last key (clamp_reach).
  const auto reach = [&](std::int64_t r) {
    return r < 0 ? -1 : fs::clamp_reach(int(std::min<std::int64_t>(r, std::numeric_limits<int>::max())), int(N), int(Nk));
  };
  L.settings.features.window_left = L.mods.window_left = reach(kw.window_left);
  L.settings.features.window_right = L.mods.window_right = reach(kw.window_right);
  L.settings.features.softcap = L.mods.softcap = float(kw.softcap);
  // ALiBi's slopes: their presence here, for the support check; their shape once the batch is known
  // (with cu_seqlens, the sequences': below).
  if (alibi) L.settings.features.alibi_slopes.assign(std::size_t(H), 0.f);
  if (!L.shape.square() && !L.step->kv_shapes)
    throw py::value_error("step " + L.step->id + " takes seqlen_k == seqlen_q and heads_k == heads only");
  if (L.settings.features.on() && !L.step->score_mods)
    throw py::value_error("step " + L.step->id + " takes no window_size, softcap or alibi_slopes");
  if (kw.dropout_p > 0.0 && !L.step->dropout) throw py::value_error("step " + L.step->id + " takes no dropout");
  const std::string why = with_backward ? L.step->backward_refusal(L.shape, L.settings) : L.step->refusal(L.shape, L.settings);
  if (!why.empty()) throw py::value_error("step " + L.step->id + "/" + variant + ": " + why);
  L.stream = reinterpret_cast<cudaStream_t>(stream);
  L.device = dev;
  if (varlen.on()) {
    if (!L.step->packed) throw py::value_error("step " + L.step->id + " takes no cu_seqlens (packed sequences)");
    const OnDevice on(dev);
    require_offsets_layout(*varlen.cu_q, dev);
    require_offsets_layout(*varlen.cu_k, dev);
    const std::int64_t offsets_count = varlen.cu_q->t.dim(0);
    if (offsets_count - 1 > 65535) throw py::value_error("cu_seqlens: at most 65535 sequences");
    L.packed.cu_q = static_cast<const std::int32_t*>(varlen.cu_q->data());
    L.packed.cu_k = static_cast<const std::int32_t*>(varlen.cu_k->data());
    if (fs::python::capturing(L.stream)) {
      // A CUDA graph being captured: the host may not wait for the offsets, and a graph replays
      // whatever they hold then, so they are the caller's word, as flash_attn takes them (prefix
      // sums from 0 to the tokens of q and of k). The grid is cut to max_seqlen_q/k where given
      // (trusted: a longer sequence would keep rows unwritten), else spans every token, which no
      // sequence exceeds (its CTAs past a sequence's end find no rows).
      if (varlen.cu_k->t.dim(0) != offsets_count || offsets_count < 2)
        throw py::value_error("cu_seqlens_q, cu_seqlens_k: prefix sums of equal length (batch + 1), at least 2");
      L.packed.count = int(offsets_count - 1);
      L.packed.max_q = int(std::min<std::int64_t>(varlen.max_q.value_or(int(N)), N));
      L.packed.max_k = int(std::min<std::int64_t>(varlen.max_k.value_or(int(Nk)), Nk));
    } else {
      const std::vector<std::int32_t> cu_q = offsets(*varlen.cu_q, L.stream), cu_k = offsets(*varlen.cu_k, L.stream);
      fs::python::require_prefix_sums(cu_q, cu_k, N, Nk);
      L.packed.count = int(cu_q.size() - 1);
      L.packed.max_q = longest(cu_q, varlen.max_q, "max_seqlen_q");
      L.packed.max_k = longest(cu_k, varlen.max_k, "max_seqlen_k");
    }
  }
  if (alibi) {  // (heads), one slope per head; or (batch, heads), a row per batch (per sequence with cu_seqlens)
    const Borrowed& a = alibi->t;
    const DLDataType t = a.t().dtype;
    const std::int64_t batches = varlen.on() ? L.packed.count : L.shape.B;
    const bool per_head = a.ndim() == 1 && a.dim(0) == H;
    const bool per_batch = a.ndim() == 2 && a.dim(0) == batches && a.dim(1) == H;
    bool dense = per_head || per_batch;  // and row-major (a dimension of one element may have any stride)
    for (std::int64_t i = a.ndim() - 1, want = 1; dense && i >= 0; want *= a.dim(int(i)), --i)
      dense = a.dim(int(i)) < 2 || a.stride(int(i)) == want;
    if (!dense || t.code != kDLFloat || t.bits != 32)
      throw py::value_error("alibi_slopes: float32, contiguous, one slope per head, shape " + fs::python::shape_text({H}) +
                            ", or a row of them per " + (varlen.on() ? "sequence, (sequences, heads) = " : "batch, (batch, heads) = ") +
                            fs::python::shape_text({batches, H}) + "; got " + Borrowed::dtype_name(t) + " " + a.shape());
    if (a.t().device.device_id != dev) throw py::value_error("alibi_slopes: on q's GPU");
    L.mods.alibi_slopes = static_cast<const float*>(alibi->data());
    L.mods.alibi_batch_stride = L.settings.features.alibi_batch_stride = per_batch ? int(H) : 0;
  }
  return L;
}

// LSE: (batch, heads, seqlen_q), or (heads, total_q) for packed sequences, float32 contiguous.
void lse_check(const Borrowed& lse, const Launch& L) {
  const fs::Shape& s = L.shape;
  const DLDataType t = lse.t().dtype;
  if (lse.t().device.device_type != kDLCUDA || lse.t().device.device_id != L.device)
    throw py::value_error("lse: a CUDA tensor on q's GPU");
  const bool packed = L.varlen;
  const std::vector<std::int64_t> want = packed ? std::vector<std::int64_t>{s.H, s.N} : std::vector<std::int64_t>{s.B, s.H, s.N};
  bool ok = lse.ndim() == int(want.size()) && t.code == kDLFloat && t.bits == 32;
  for (int i = 0; ok && i < lse.ndim(); ++i) ok = lse.dim(i) == want[i];
  const int r = packed ? 0 : 1;  // the heads' dimension
  ok = ok && (s.N < 2 || lse.stride(r + 1) == 1) && (s.H < 2 || lse.stride(r) == s.N) &&
       (packed || s.B < 2 || lse.stride(0) == std::int64_t(s.H) * s.N);
  if (!ok)
    throw py::value_error(std::string("lse: float32 ") + (packed ? "(heads, total_q) = " : "(batch, heads, seqlen_q) = ") +
                          fs::python::shape_text(want) + ", contiguous; got " + Borrowed::dtype_name(t) + " " + lse.shape());
}

// The keywords of _forward and _backward but the tensors, read from their Python objects
// (dlpack_tensor.hpp: one line for a value its type cannot hold) and checked.
struct Call {
  std::string step, variant;
  fs::python::Keywords kw;
  std::optional<int> max_q, max_k;
  std::int64_t stream = 0;
};

using O = const py::object&;

Call call_of(O step, O variant, O causal, O scale, O window, O softcap, O dropout_p, O seed, O max_q, O max_k, O stream) {
  Call c;
  c.step = fs::python::text(step, "step");
  c.variant = fs::python::text(variant, "variant");
  c.kw = fs::python::keywords(dropout_p, scale, causal, window, softcap, seed);
  c.max_q = fs::python::optional_int(max_q, "max_seqlen_q");
  c.max_k = fs::python::optional_int(max_k, "max_seqlen_k");
  c.stream = fs::python::integer(stream, "stream", 0, std::numeric_limits<std::int64_t>::max());
  return c;
}

void forward(O q_obj, O k_obj, O v_obj, O out_obj, O lse_obj, O step_obj, O variant_obj, O causal, O scale, O window, O softcap,
             O alibi_obj, O dropout_p, O seed, O cu_q, O cu_k, O max_q, O max_k, O stream_obj, O workspace_obj) {
  const Call c = call_of(step_obj, variant_obj, causal, scale, window, softcap, dropout_p, seed, max_q, max_k, stream_obj);
  const std::int64_t stream = c.stream;
  const Operand q(q_obj, "q", stream), k(k_obj, "k", stream), v(v_obj, "v", stream), out(out_obj, "out", stream);
  std::optional<Operand> alibi;
  if (!alibi_obj.is_none()) alibi.emplace(alibi_obj, "alibi_slopes", stream);
  const VarlenArgs varlen(cu_q, cu_k, c.max_q, c.max_k, stream);
  const Launch L = prepare(q, k, v, c.step, c.variant, c.kw, alibi, varlen, stream);
  const fs::Shape& s = L.shape;
  out.expect(L.dims(s.N, s.H));
  if (out.t.t().dtype.code != q.t.t().dtype.code || out.t.t().dtype.bits != q.t.t().dtype.bits)
    throw py::type_error("out: q's dtype");
  const std::int64_t dl = dlpack_stream(stream);
  const Borrowed lse(lse_obj, "lse", &dl);
  lse_check(lse, L);

  OnDevice on(L.device);
  const Workspace ws(L.step->fwd_workspace(s, L.settings), stream, workspace_obj, L.device);
  fs::FwdParams p;
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = out.data();
  p.lse = reinterpret_cast<float*>(lse.address());
  p.q_strides = q.strides(), p.k_strides = k.strides(), p.v_strides = v.strides(), p.o_strides = out.strides();
  L.into(p, ws.get());
  launched([&] { L.step->forward(p); });
  g_last_step = L.step->id + "/" + L.step->variants[std::size_t(L.settings.variant)];
  g_last_launch.clear();
  for (const auto& [name, ptr] : {std::pair{"q", p.q}, {"k", p.k}, {"v", p.v}, {"out", static_cast<const void*>(p.o)},
                                  {"workspace", static_cast<const void*>(p.workspace)}})
    if (ptr) g_last_launch.emplace_back(name, reinterpret_cast<std::uintptr_t>(ptr));
}

void backward(O q_obj, O k_obj, O v_obj, O out_obj, O lse_obj, O dout_obj, O dq_obj, O dk_obj, O dv_obj, O step_obj,
              O variant_obj, O causal, O scale, O window, O softcap, O alibi_obj, O dropout_p, O seed, O cu_q, O cu_k, O max_q,
              O max_k, O stream_obj, O workspace_obj) {
  const Call c = call_of(step_obj, variant_obj, causal, scale, window, softcap, dropout_p, seed, max_q, max_k, stream_obj);
  const std::int64_t stream = c.stream;
  const std::string& variant = c.variant;
  const Operand q(q_obj, "q", stream), k(k_obj, "k", stream), v(v_obj, "v", stream), out(out_obj, "out", stream);
  const Operand dout(dout_obj, "dout", stream), dq(dq_obj, "dq", stream), dk(dk_obj, "dk", stream), dv(dv_obj, "dv", stream);
  std::optional<Operand> alibi;
  if (!alibi_obj.is_none()) alibi.emplace(alibi_obj, "alibi_slopes", stream);
  const VarlenArgs varlen(cu_q, cu_k, c.max_q, c.max_k, stream);
  const Launch L = prepare(q, k, v, c.step, c.variant, c.kw, alibi, varlen, stream);
  if (!L.step->backward) throw py::value_error("step " + L.step->id + " has no backward (steps 05, 08 and 09 have)");
  if (L.step->fwd_workspace(L.shape, L.settings) > 0)
    throw py::value_error("step " + L.step->id + "/" + variant + " keeps state between its passes; the module runs it forward only");
  const fs::Shape& s = L.shape;
  for (const Operand* o : {&out, &dout, &dq}) o->expect(L.dims(s.N, s.H));
  for (const Operand* o : {&dk, &dv}) o->expect(L.dims(s.keys(), s.kv_heads()));
  for (const Operand* o : {&out, &dout, &dq, &dk, &dv})
    if (o->t.t().dtype.code != q.t.t().dtype.code || o->t.t().dtype.bits != q.t.t().dtype.bits)
      throw py::type_error(std::string(o->t.name()) + ": q's dtype");
  const std::int64_t dl = dlpack_stream(stream);
  const Borrowed lse(lse_obj, "lse", &dl);
  lse_check(lse, L);

  OnDevice on(L.device);
  const Workspace ws(L.step->bwd_workspace(s, L.settings), stream, workspace_obj, L.device);
  fs::BwdParams p;
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = out.data(), p.dout = dout.data();
  p.lse = reinterpret_cast<const float*>(lse.address());
  p.dq = dq.data(), p.dk = dk.data(), p.dv = dv.data();
  p.q_strides = q.strides(), p.k_strides = k.strides(), p.v_strides = v.strides(), p.o_strides = out.strides();
  p.dout_strides = dout.strides(), p.dq_strides = dq.strides(), p.dk_strides = dk.strides(), p.dv_strides = dv.strides();
  L.into(p, ws.get());
  launched([&] { L.step->backward(p); });
  g_last_step = L.step->id + "/" + L.step->variants[std::size_t(L.settings.variant)];
  g_last_launch.clear();
  for (const auto& [name, ptr] : {std::pair{"q", p.q}, {"k", p.k}, {"v", p.v}, {"out", p.o}, {"dout", p.dout},
                                  {"dq", static_cast<const void*>(p.dq)}, {"dk", static_cast<const void*>(p.dk)},
                                  {"dv", static_cast<const void*>(p.dv)}, {"workspace", static_cast<const void*>(p.workspace)}})
    if (ptr) g_last_launch.emplace_back(name, reinterpret_cast<std::uintptr_t>(ptr));
}

}  // namespace

namespace fs::python {

#define FS_GPU_KEYWORDS                                                                                              \
  py::arg("step") = "08", py::arg("variant") = "fa2", py::arg("causal") = false, py::arg("softmax_scale") = py::none(), \
      py::arg("window_size") = py::make_tuple(-1, -1), py::arg("softcap") = 0.0, py::arg("alibi_slopes") = py::none(),    \
      py::arg("dropout_p") = 0.0, py::arg("seed") = 1, py::arg("cu_seqlens_q") = py::none(),                          \
      py::arg("cu_seqlens_k") = py::none(), py::arg("max_seqlen_q") = py::none(), py::arg("max_seqlen_k") = py::none(),  \
      py::arg("stream") = 0, py::arg("workspace") = py::none()

void add_gpu(py::module_& m) {
  m.def("_forward", &forward,
        "Launches a step's forward on CUDA tensors in place: out (like q) and lse (batch, heads, seqlen_q) float32 are\n"
        "written. flashsteps.attention is the interface; this is its kernel call.",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"), py::kw_only(), FS_GPU_KEYWORDS);
  m.def("_backward", &backward,
        "Launches a step's backward on CUDA tensors in place: dq, dk, dv (like q, k, v) are written.",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"), py::arg("dout"), py::arg("dq"), py::arg("dk"),
        py::arg("dv"), py::kw_only(), FS_GPU_KEYWORDS);
  m.def("_last_step", [] { return g_last_step; },
        "The step and variant of the last _forward or _backward (\"09_hopper/fa3\"), the one step 'auto' chose.");
  m.def("_has_step", [](const std::string& id) { return fs::find_step(id) != nullptr; },
        "Whether this build has step `id` (\"08\", \"09\", ...).", py::arg("id"));
  m.def("_hopper", &hopper_device,
        "Whether step 'auto' may run step 09 on this GPU: sm_90 (an H100 or H200), and this build has step 09.",
        py::arg("device") = 0);
  m.def("_last_launch",
        [] {
          py::dict d;
          for (const auto& [name, address] : g_last_launch) d[py::str(name)] = address;
          return d;
        },
        "The addresses the last _forward or _backward launched the kernels with, by tensor name (the workspace's too,\n"
        "where the pass has one).");
}

}  // namespace fs::python
