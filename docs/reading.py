#!/usr/bin/env python3
"""The reading path through the code, generated into the lessons so that it cannot go stale:

    <!-- reading:04_online_softmax -->     "read these files, in this order", with the line ranges
    ...generated...                        of each kernel and helper as the tree has them now
    <!-- /reading -->

    <!-- diff:04_online_softmax -->        the exact diff from the previous step: the previous
    ...generated...                        step's kernel against this step's, or the lines that
    <!-- /diff -->                         changed where a step adds a policy object

`python3 docs/reading.py` rewrites the blocks; `--check` exits 1 (and changes nothing) when one
is out of date: CI runs that. What each lesson lists is in READING and DIFFS below; a symbol is
a function, kernel, struct or alias defined at namespace scope, found by its name.
"""
import argparse
import difflib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# lesson → [(file, [symbols], why)], in reading order: the kernel first, then what it calls.
READING = {
    "01_naive": [
        ("steps/01_naive/naive.cu", ["scores_kernel", "softmax_kernel", "pv_kernel"],
         "the forward: S = τQKᵀ, P = softmax(S), O = PV, one kernel each, every N×N matrix in HBM"),
        ("steps/01_naive/naive.cu", ["dv_kernel", "dp_kernel", "rowdot_kernel", "ds_kernel", "dq_kernel", "dk_kernel"],
         "the backward, one kernel per line of Algorithm 3"),
        ("steps/01_naive/naive.cu", ["naive_forward", "naive_backward"], "the launchers: the order of the kernels"),
        ("common/reference.cpp", ["reference_forward"], "the fp64 reference every step is checked against"),
    ],
    "02_fused": [
        ("steps/02_fused/fused.cu", ["scores_softmax_kernel"], "S and its softmax in one kernel: S stays on chip"),
        ("steps/02_fused/fused.cu", ["ds_fused_kernel"], "dP, D and dS in one kernel: dP stays on chip"),
        ("steps/02_fused/fused.cu", ["rows_per_cta", "fused_forward", "fused_backward"],
         "how many rows of S fit in shared memory, and the launchers"),
    ],
    "03_tiled": [
        ("steps/03_tiled/tiled.cu", ["tiled_forward_kernel"], "the kernel: two passes over K, then V"),
        ("common/flash_tile.cuh", ["RowTile", "load_q_rows", "row_scores", "mask_scores", "row_max", "accumulate_pv",
                                   "store_row"],
         "the tile helpers it calls (and steps 04-06 too): who holds which rows, S = qKᵀ, O += PV"),
        ("common/tile_policies.cuh", ["DenseWalk"], "which key tiles a CTA visits"),
        ("common/cuda_utils.cuh", ["cp_async_16", "load_rows_async"], "tiles into shared memory with cp.async"),
    ],
    "04_online_softmax": [
        ("steps/04_online_softmax/flash2_forward.cuh", ["flash2_forward_kernel"],
         "fa2: one pass, the running max and normaliser, O rescaled by α = e^(m − m_new)"),
        ("common/flash_tile.cuh", ["row_scores", "mask_scores", "accumulate_pv", "store_row"],
         "the tile helpers, as in step 03"),
        ("common/tile_policies.cuh", ["DenseWalk", "NoDropout", "NoFeatures"],
         "the three policy objects it takes, plain here: steps 05 and 06 pass their own walks and "
         "dropout, common/flash_features.cuh FlashAttention's softcap, ALiBi and window"),
        ("steps/04_online_softmax/flash.cu", ["alg1_forward_kernel"],
         "alg1: Algorithm 1 as the paper writes it, O, ℓ, m in HBM"),
    ],
    "05_recompute_backward": [
        ("steps/05_recompute_backward/backward.cuh", ["bwd_preprocess_kernel"], "D = rowsum(dO ∘ O), once per row"),
        ("steps/05_recompute_backward/backward.cuh", ["bwd_dkdv_kernel"],
         "dK, dV per key tile (and dQ by atomics), P recomputed from LSE"),
        ("steps/05_recompute_backward/backward.cuh", ["bwd_dq_kernel"], "the deterministic dQ, per query tile"),
        ("steps/05_recompute_backward/dropout.cuh", ["KeepBits", "PhiloxDropout"],
         "dropout as a policy object: Z regenerated from the seed wherever it is needed"),
        ("steps/05_recompute_backward/backward.cuh", ["launch_backward", "run_backward"], "the launchers"),
        ("common/philox.hpp", ["philox4x32_10", "dropout_bits"], "the counter-based generator behind Z"),
    ],
    "07_smyrf": [
        ("common/smyrf.hpp", ["SmyrfGeometry"], "where a round's clusters lie in its sorted orders (host and GPU)"),
        ("steps/07_smyrf/hash.cuh", ["smyrf_norms_kernel", "smyrf_hash_kernel"],
         "the clustering: XBOX+ and E2LSH hashes of every round, in double, as sort keys"),
        ("steps/07_smyrf/smyrf.cu", ["cluster_on_gpu"], "the clustering's launches and the sort (CUB's segmented radix sort): the orders"),
        ("steps/07_smyrf/schedule.cuh", ["launch_forward_rounds_of", "launch_backward_rounds"],
         "the launches in order, with their grids (the GPU's and the CPU emulation's alike)"),
        ("steps/07_smyrf/gather.cuh", ["gather_rows_async", "gather_rows"],
         "the step's addition to the tile machinery: rows through an order"),
        ("steps/07_smyrf/cluster_forward.cuh", ["smyrf_round_forward_kernel"],
         "one round: step 04's fa2 over a cluster's gathered rows, merged into O and LSE by the LSE rule"),
        ("steps/07_smyrf/cluster_backward.cuh", ["smyrf_round_dkdv_kernel", "smyrf_round_dq_kernel"],
         "the backward of one round: step 05's kernels over the clusters, adding to dK, dV and dQ"),
        ("common/smyrf.cpp", ["forward_row", "smyrf_check_orders"],
         "the host reference of a query's rounds, and the check a GPU's clusters are held to"),
    ],
    "08_tensor_cores": [
        ("steps/08_tensor_cores/flash_tc_forward.cuh", ["tc_forward_kernel"],
         "the kernel: step 04's fa2 with S = QKᵀ and O += P̃V on mma.sync, P̃ kept in registers"),
        ("steps/08_tensor_cores/mma.cuh", ["Element", "ldmatrix_x4", "ldmatrix_x4_trans", "SmemTile", "LaneAddress"],
         "the instructions: mma.sync and its fragment layout, ldmatrix, the XOR swizzle, a lane's address made once"),
        ("steps/08_tensor_cores/flash_tc_forward.cuh", ["load_tile", "a_address", "b_k_address", "load_a", "load_b_k", "load_b_v"],
         "tiles into shared memory (cp.async) and fragments out of it (ldmatrix)"),
        ("steps/08_tensor_cores/forward_configs.cuh", ["Fa2", "tc_forward_dispatch"],
         "the ladder's variants and fa2's tiles per head dimension"),
        ("steps/08_tensor_cores/tc_softmax.cuh", ["tc_mask_tile", "tc_online_softmax", "tc_finish_rows"],
         "the online softmax on the accumulator fragments, which the 16-bit and the fp32 forward share"),
        ("steps/08_tensor_cores/flash_tc_forward_f32.cuh", ["mma_3x", "mma_3x_in_place", "tc_forward_f32_kernel"],
         "fp32 on the tensor cores (3xtf32): each operand a TF32 head and rest, three products; S summed from zero per 8 of d, P̃V per key tile"),
        ("steps/08_tensor_cores/flash_tc_backward.cuh", ["tc_dkdv_kernel"],
         "the backward's first dK/dV kernel (key_warps; fa2 at d = 32, 96, 256): Sᵀ and dPᵀ per warp's 16 keys, Pᵀ and dSᵀ fed to dV and dK from the accumulators, dQ by atomics"),
        ("steps/08_tensor_cores/flash_tc_backward.cuh", ["tc_dkdv_smem_kernel"],
         "fa2's at d = 64 and 128, FlashAttention-2's warp layout: 32 keys × a share of the queries per warp, P and dS through shared memory, the same sums bit for bit"),
        ("steps/08_tensor_cores/flash_tc_backward.cuh", ["tc_prob", "tc_dq_kernel"],
         "P recomputed as the forward rounded it; the deterministic dQ in the forward's orientation"),
        ("steps/08_tensor_cores/flash_tc_backward_f32.cuh", ["tc_dkdv_f32_kernel"],
         "3xtf32's backward: tc_dkdv_kernel's 16-key warps in fp32, the forward's operand paths, dS transposed through shared memory for dQ"),
        ("steps/08_tensor_cores/tc_dropout.cuh", ["TcDropout"], "step 05's dropout mask in the mma layouts"),
        ("steps/08_tensor_cores/tc_features.cuh", ["tc_scores"],
         "FlashAttention's softcap, ALiBi and window on the accumulator fragments, in the kernels' τ-less units"),
    ],
    "09_hopper": [
        ("steps/09_hopper/configs.cuh", ["Fa3Config"],
         "the production config: fa3's tiles per d and its techniques, each a named field"),
        ("steps/09_hopper/traits.cuh", ["ForwardTraits", "TmaMaps", "ForwardSmem", "ConsumerThread", "ConsumerNotes"],
         "what a config implies: threads, registers, boxes, the shared memory's layout and its barriers; a consumer thread's place and its trace events"),
        ("steps/09_hopper/tile_scheduler.cuh", ["Work", "work_tile", "kv_head", "ForwardScheduler", "forward_grid"],
         "the work tiles a CTA walks: one per CTA, or persistent, the causal ones longest first"),
        ("steps/09_hopper/flash_hopper_forward.cuh", ["forward_cta", "hopper_forward_kernel"],
         "the kernel: shared memory and barriers set up, each warpgroup handed its role, the loops over the work and key tiles"),
        ("steps/09_hopper/hopper.cuh", ["mbar_init", "mbar_arrive_expect_tx", "mbar_arrive", "mbar_wait", "tma_load_4d"],
         "the machinery of the copies: mbarriers (arrivals, bytes and phases) and TMA loads"),
        ("steps/09_hopper/forward_producer.cuh", ["load_key_rows", "VRows", "ForwardProducer", "ProducerCopies"],
         "the producer: Q, then K_t ahead of V_{t−1} into the ring of stages, each stage refilled once released"),
        ("steps/09_hopper/hopper.cuh", ["make_desc", "desc_add", "wgmma_ss", "wgmma_rs", "fence_operands", "named_sync",
                                        "named_arrive"],
         "wgmma: shared-memory descriptors for the 128-byte swizzle, the two operand forms, the registers pinned while a product is in flight; named barriers"),
        ("steps/09_hopper/forward_consumer.cuh", ["Turns", "ForwardConsumer"],
         "the consumers: S = QKᵀ and O += P̃V by wgmma, one product at a time or FlashAttention-3's overlap, ping-pong's turns"),
        ("steps/09_hopper/softmax.cuh", ["row_max", "softmax_tile", "rescale_o", "pack_p", "ForwardSoftmax"],
         "step 08's online softmax with O's rescale left to the caller, P̃ rounded as wgmma's A operand"),
        ("steps/09_hopper/mask.cuh", ["ForwardMask"], "keys past N and past the diagonal, step 08's tc_mask_tile"),
        ("steps/09_hopper/forward_epilogue.cuh", ["ForwardEpilogue"],
         "O / ℓ and LSE out, O through shared memory and a TMA store"),
        ("steps/09_hopper/hopper.cuh", ["tma_store_4d", "bulk_commit", "bulk_wait_read", "bulk_wait", "fence_async_shared"],
         "the TMA store and its bulk groups"),
        ("steps/09_hopper/configs.cuh", ["WsPingPongConfig", "WsOverlapConfig", "WsConfig", "WgmmaConfig",
                                         "with_forward_config"],
         "the ladder's rungs, each fa3's config less one technique, and the variant → config map"),
        ("steps/09_hopper/rung_wgmma.cuh", ["ConsumerCopies"],
         "the wgmma rung: consumer 0's first thread issues the copies between its products"),
        ("steps/09_hopper/backward_configs.cuh", ["Fa3BwdConfig", "DeterministicBwdConfig", "backward_dispatch"],
         "the backward's configs: fa3's, and deterministic's ordered dQ"),
        ("steps/09_hopper/backward_traits.cuh", ["BackwardTraits", "BwdMaps", "BackwardSmem", "KeyTile"],
         "what they imply, and the backward's scheduler: one CTA per key tile, the query tiles walked from the last"),
        ("steps/09_hopper/flash_hopper_backward.cuh", ["hopper_backward_kernel"],
         "the backward's kernel: the producer's copies, then per query tile the consumers' products, P and dS, and dQ's add"),
        ("steps/09_hopper/backward_producer.cuh", ["BackwardProducer"],
         "K and V once, Q and dO by TMA and LSE and D by warp 1 into the ring"),
        ("steps/09_hopper/backward_consumer.cuh", ["BackwardThread", "BackwardNotes", "BackwardConsumer"],
         "Sᵀ and dPᵀ per 64-key warpgroup, P and dS (step 08's tc_p_ds_pair), dK and dV from registers, a block of dQ"),
        ("steps/09_hopper/backward_dq.cuh", ["DqAdd"],
         "dQ's block added to dQacc by a TMA reduce-add, in the key tiles' order for deterministic"),
        ("steps/09_hopper/hopper.cuh", ["tma_reduce_add_4d", "fence_proxy_async_global", "ld_acquire", "red_release_add"],
         "the reduce-add, and the counters that order it"),
        ("steps/09_hopper/fp8.cuh", ["fp8_slot", "Fp8Layout", "fp8_layout", "quantize_fp8_kernel", "fp8_quantize_grid"],
         "FP8: the quantizer — a scale per block (128 rows of Q, 224 of K and V), and Vᵀ with each 32 keys in the order a thread holds P̃"),
        ("steps/09_hopper/fp8_softmax.cuh", ["Fp8Lazy", "fp8_offset", "softmax_tile_fp8", "fp8_lse_m", "pack_p_fp8",
                                             "Fp8Softmax"],
         "the FP8 softmax: scores in base-2 units with P̃ up to 2⁸, the lazy max, P̃ rounded to e4m3 where it lies"),
        ("steps/09_hopper/flash_hopper_fp8.cuh", ["VTransposed", "Fp8Config", "hopper_fp8_forward_kernel",
                                                  "set_fp8_scales", "launch_hopper_forward_fp8"],
         "the FP8 forward: Vᵀ read like K, fa3's config on 224-key tiles, the kernel over the same roles, the quantizer before it"),
        ("steps/09_hopper/variants.hpp", ["HopperVariantRow", "hopper_variant", "rows_in_id_order", "is_rung"],
         "the variants, one row each: names, rungs, e4m3, which backward"),
        ("steps/09_hopper/flash_hopper_forward.cuh", ["launch_forward", "launch_hopper_forward"],
         "the launcher: tensor maps, the grid, the trace's lanes"),
        ("steps/09_hopper/flash_hopper_backward.cuh", ["launch_hopper_backward"],
         "the backward's three kernels (step 08's preprocess and convert around it)"),
        ("steps/09_hopper/hopper.cu", ["make_tensor_map", "block_n", "unsupported", "step09_info"],
         "TMA's tensor maps (cuTensorMapEncodeTiled from the driver at run time), what the step refuses, its table"),
    ],
    "06_block_sparse": [
        ("steps/06_block_sparse/block_list_walk.cuh", ["BlockListWalk"],
         "the step's addition: a walk over the nonzero blocks of the mask"),
        ("steps/06_block_sparse/block_sparse.cu", ["block_sparse_forward", "block_sparse_backward"],
         "steps 04 and 05's kernels, instantiated with it"),
        ("common/block_mask.cpp", ["make_pattern", "to_lists"], "the masks, and their lists in CSR and CSC form"),
        ("steps/06_block_sparse/block_sparse.cu", ["mask_unsupported", "io_block_sparse_forward"],
         "which blocks the kernels' tiles allow; the IO model over the lists"),
    ],
}

# lesson → [(title, before, after)], each side a list of (file, symbol): the symbols' text,
# concatenated, diffed.
DIFFS = {
    "02_fused": [
        ("step 01's scores and softmax kernels → step 02's fused kernel",
         [("steps/01_naive/naive.cu", "scores_kernel"), ("steps/01_naive/naive.cu", "softmax_kernel")],
         [("steps/02_fused/fused.cu", "scores_softmax_kernel")]),
    ],
    "03_tiled": [
        ("step 02's fused scores-softmax kernel → step 03's tiled kernel",
         [("steps/02_fused/fused.cu", "scores_softmax_kernel")],
         [("steps/03_tiled/tiled.cu", "tiled_forward_kernel")]),
    ],
    "04_online_softmax": [
        ("step 03's kernel → step 04's fa2 kernel",
         [("steps/03_tiled/tiled.cu", "tiled_forward_kernel")],
         [("steps/04_online_softmax/flash2_forward.cuh", "flash2_forward_kernel")]),
    ],
    "05_recompute_backward": [
        ("the forward: step 04's kernel with step 05's dropout policy",
         [("steps/04_online_softmax/flash.cu", "launch")],
         [("steps/05_recompute_backward/backward.cu", "recompute_forward")]),
    ],
    "07_smyrf": [
        ("step 04's fa2 kernel → step 07's round kernel (gathered rows, the cluster's keys, the merge)",
         [("steps/04_online_softmax/flash2_forward.cuh", "flash2_forward_kernel")],
         [("steps/07_smyrf/cluster_forward.cuh", "smyrf_round_forward_kernel")]),
        ("step 05's dK/dV kernel → step 07's (keys through the order, the clusters meeting them)",
         [("steps/05_recompute_backward/backward.cuh", "bwd_dkdv_kernel")],
         [("steps/07_smyrf/cluster_backward.cuh", "smyrf_round_dkdv_kernel")]),
    ],
    "08_tensor_cores": [
        ("step 04's fa2 kernel → step 08's tensor-core kernel",
         [("steps/04_online_softmax/flash2_forward.cuh", "flash2_forward_kernel")],
         [("steps/08_tensor_cores/flash_tc_forward.cuh", "tc_forward_kernel")]),
        ("step 05's dQ kernel → step 08's (the deterministic dQ on tensor cores)",
         [("steps/05_recompute_backward/backward.cuh", "bwd_dq_kernel")],
         [("steps/08_tensor_cores/flash_tc_backward.cuh", "tc_dq_kernel")]),
    ],
    "09_hopper": [
        ("step 08's tensor-core forward → step 09's CTA program (the roles it hands its warpgroups)",
         [("steps/08_tensor_cores/flash_tc_forward.cuh", "tc_forward_kernel")],
         [("steps/09_hopper/flash_hopper_forward.cuh", "forward_cta")]),
        ("step 08's online softmax → step 09's (O's rescale left to the caller, which waits for P̃V)",
         [("steps/08_tensor_cores/tc_softmax.cuh", "tc_online_softmax")],
         [("steps/09_hopper/softmax.cuh", "softmax_tile")]),
        ("the ladder's first rung, wgmma → ws: the copies of consumer 0's thread → the producer warpgroup's",
         [("steps/09_hopper/rung_wgmma.cuh", "ConsumerCopies")],
         [("steps/09_hopper/forward_producer.cuh", "ForwardProducer")]),
        ("step 08's dK/dV kernel → step 09's Hopper backward",
         [("steps/08_tensor_cores/flash_tc_backward.cuh", "tc_dkdv_smem_kernel")],
         [("steps/09_hopper/flash_hopper_backward.cuh", "hopper_backward_kernel")]),
    ],
    "06_block_sparse": [
        ("the forward: step 05's launch → step 06's (the walk is the difference)",
         [("steps/05_recompute_backward/backward.cu", "recompute_forward")],
         [("steps/06_block_sparse/block_sparse.cu", "block_sparse_forward")]),
        ("the backward: step 05's → step 06's",
         [("steps/05_recompute_backward/backward.cu", "recompute_backward")],
         [("steps/06_block_sparse/block_sparse.cu", "block_sparse_backward")]),
    ],
}

READING_MARKER = re.compile(r"(<!-- reading:(?P<id>[\w]+) -->\n)(?P<body>.*?)(<!-- /reading -->)", re.S)
DIFF_MARKER = re.compile(r"(<!-- diff:(?P<id>[\w]+) -->\n)(?P<body>.*?)(<!-- /diff -->)", re.S)


def read_lines(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read().split("\n")


def find_symbol(path, name):
    """(first, last) lines, 1-based and inclusive, of the definition of `name` in `path`: its
    template and attribute lines and the comment right above it, through its closing brace at
    column 0 (or the `;` of a one-line definition)."""
    lines = read_lines(path)
    call = re.compile(r"\b" + re.escape(name) + r"\s*(<[^;{}]*>)?\s*\(")
    typedef = re.compile(r"^(struct|class|union)\s+" + re.escape(name) + r"\b|^using\s+" + re.escape(name) + r"\b")
    start = None
    for i, line in enumerate(lines):
        if line.lstrip().startswith("//"):
            continue
        if typedef.search(line):
            start = i
            break
        at_column_0 = not line[:1].isspace() and line.strip()
        continuation = line.startswith("    ") and not line.startswith("     ") and i > 0 and \
            lines[i - 1].startswith("__global__")
        if call.search(line) and (at_column_0 or continuation) and not line.rstrip().endswith(";"):
            start = i
            break
    if start is None:
        sys.exit(f"reading.py: {path}: no definition of {name}")
    first = start
    while first > 0 and re.match(r"^(template\b|__global__|__device__|__host__|inline\b|static\b|constexpr\b)",
                                 lines[first - 1]):
        first -= 1
    while first > 0 and lines[first - 1].startswith("//"):
        first -= 1
    last = start
    if not re.search(r"\{", "\n".join(lines[start:start + 8])) or lines[start].rstrip().endswith(";"):
        while not lines[last].rstrip().endswith(";"):
            last += 1
    else:
        opened = False
        depth = 0
        for j in range(start, len(lines)):
            code = lines[j].split("//")[0]
            depth += code.count("{") - code.count("}")
            opened = opened or "{" in code
            if opened and depth == 0:
                last = j
                break
        else:
            sys.exit(f"reading.py: {path}: {name} is never closed")
    return first + 1, last + 1


def symbol_text(path, name):
    first, last = find_symbol(path, name)
    return read_lines(path)[first - 1:last]


def ranges(path, names):
    """Line ranges of the symbols, adjacent ones merged (a blank line apart counts as adjacent)."""
    spans = sorted(find_symbol(path, n) for n in names)
    merged = []
    for a, b in spans:
        if merged and a <= merged[-1][1] + 2:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


def reading_block(lesson, lesson_dir):
    out = ["Read the code in this order (generated by `docs/reading.py` from the tree as it is; the line",
           "ranges follow the code):", ""]
    for n, (path, names, why) in enumerate(READING[lesson], 1):
        link = os.path.relpath(os.path.join(ROOT, path), lesson_dir)
        spans = ranges(path, names)
        where = ", ".join(f"[{a}–{b}]({link}#L{a}-L{b})" for a, b in spans)
        symbols = ", ".join(f"`{s}`" for s in names)
        out.append(f"{n}. `{path}` lines {where}: {symbols} — {why}")
    return "\n".join(out) + "\n"


def diff_block(lesson):
    out = []
    for title, before, after in DIFFS[lesson]:
        a = [line for path, name in before for line in symbol_text(path, name) + [""]][:-1]
        b = [line for path, name in after for line in symbol_text(path, name) + [""]][:-1]
        name_a = " + ".join(f"{p}:{s}" for p, s in before)
        name_b = " + ".join(f"{p}:{s}" for p, s in after)
        diff = list(difflib.unified_diff(a, b, name_a, name_b, n=3, lineterm=""))
        changed = sum(1 for d in diff if d[:1] in "+-" and d[:3] not in ("+++", "---"))
        out += [f"**{title}** ({changed} lines changed; generated by `docs/reading.py`):", "", "```diff"]
        out += diff
        out += ["```", ""]
    return "\n".join(out)


def filled(marker, text, path, lesson, make):
    """`text` with the body of its `marker` block for `lesson` made anew."""
    if not marker.search(text):
        sys.exit(f"reading.py: {path}: no {marker.pattern.split('(?P')[0].lstrip('(')}{lesson} --> block")

    def sub(m):
        if m.group("id") != lesson:
            sys.exit(f"reading.py: {path}: a block names {m.group('id')}, not {lesson}")
        return m.group(1) + make() + m.group(4)
    return marker.sub(sub, text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated block is out of date")
    args = ap.parse_args()
    lessons = sorted(set(READING) | set(DIFFS))
    stale = []
    for lesson in lessons:
        path = os.path.join(ROOT, "steps", lesson, "README.md")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = text
        if lesson in READING:
            new = filled(READING_MARKER, new, path, lesson, lambda: reading_block(lesson, os.path.dirname(path)))
        if lesson in DIFFS:
            new = filled(DIFF_MARKER, new, path, lesson, lambda: diff_block(lesson))
        if new != text:
            stale.append(os.path.relpath(path, ROOT))
            if not args.check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
    if args.check and stale:
        print("out of date (run python3 docs/reading.py):", ", ".join(stale))
        return 1
    verb = "checked" if args.check else "wrote"
    print(f"{verb} the reading path of {len(lessons)} lessons" + (f"; updated {', '.join(stale)}" if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
