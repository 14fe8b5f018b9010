#!/usr/bin/env python3
"""The reading path through the code, generated into the lessons so that it cannot go stale:

    <!-- reading:04_online_softmax -->     "read these files, in this order", with the line ranges
    ...generated...                        of each kernel and helper as the tree has them now
    <!-- /reading -->

    <!-- diff:04_online_softmax -->        a line per step diff, linked: the exact diff from the
    ...generated...                        previous step (its kernel against this step's, or the
    <!-- /diff -->                         lines that changed where a step adds a policy object),
                                           written whole into steps/NN_*/DIFF.md beside the lesson

`python3 docs/reading.py` rewrites the blocks and the DIFF.md files; `--check` exits 1 (and changes
nothing) when one is out of date, when a lesson's reading path covers less than 90% of what its
kernels use (THRESHOLD; FLOOR holds a lesson to less for a while), or when a lesson is longer than
one sitting or lacks a section of the lessons' outline (OUTLINE, below; `--lessons` prints each
lesson's size and what it lacks): CI runs that. What each lesson lists is in READING and DIFFS
below; a symbol is a function, kernel, struct, enum, alias, constant or macro defined at namespace
scope, found by its name (every overload and specialization of it in the file).

Coverage (`--coverage` prints it, with what a path leaves out): MAIN names each lesson's kernels
and the launchers that launch them. From there the names their code uses are followed,
transitively, to the definitions of steps/ and of the helpers of common/ in COMMON: a name resolves
to a definition of its namespace in a file that the code's translation unit includes, or, for a
function only declared there, in the file that defines it. Other kernels stop the walk (and the
launchers that lead only to them: other variants). The lines of the definitions reached, each with
its template header and the comment above it, are what a reader of the kernel reads; a lesson's
coverage is the share of them inside its READING ranges.
"""
import argparse
import difflib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What every launcher takes (common/problem.hpp): the shape, the tensors, the fields of every step.
PARAMS = ["Shape", "Strides", "Packed", "Dropout", "BlockSparse", "SmyrfParams", "ScoreMods", "as", "FwdPart",
          "FwdParams"]

# lesson → [(file, [symbols], why)], in reading order: the kernel first, then what it calls.
READING = {
    "01_naive": [
        ("common/problem.hpp", PARAMS + ["BwdParams"],
         "what every launcher takes: the shape, the tensors (as<float> views them), scale, causal, stream, trace sink; "
         "the fields of later steps (layouts, packed sequences, dropout, block masks, SMYRF, FlashAttention's "
         "features) stay at their defaults here"),
        ("steps/01_naive/naive.cu", ["kTile", "kWarp", "NaiveFwdWorkspace", "fwd_workspace", "NaiveBwdWorkspace",
                                     "bwd_workspace", "extent"],
         "the workspaces: S and P of the forward, dP (then dS) and D of the backward"),
        ("steps/01_naive/naive.cu", ["scores_kernel", "softmax_kernel", "pv_kernel"],
         "the forward: S = τQKᵀ, P = softmax(S), O = PV, one kernel each, every N×N matrix in HBM"),
        ("steps/01_naive/naive.cu", ["dv_kernel", "dp_kernel", "rowdot_kernel", "ds_kernel", "dq_kernel", "dk_kernel"],
         "the backward, one kernel per line of Algorithm 3"),
        ("common/cuda_utils.cuh", ["kWarpSize", "warp_sum", "warp_max"], "the warp reductions of the softmax and of D"),
        ("steps/01_naive/naive.cu", ["grid2d", "kRowsPerBlock", "row_blocks", "naive_pv", "naive_dv", "naive_dq_dk",
                                     "naive_forward", "naive_backward"],
         "the launchers: the grids and the order of the kernels (step 02 keeps naive_pv, naive_dv and naive_dq_dk)"),
        ("common/recorder/device.cuh", ["kF", "global_timer", "sm_id", "CtaTracer", "for_each_head", "for_each_tile",
                                        "FS_TRACE_EVENT"],
         "tracing: one thread per CTA records the end of each phase; CtaTracer<false> compiles every event to nothing"),
        ("common/recorder/launch.cuh", ["allow_dynamic_smem", "launch"],
         "a launch: the plain kernel, or with a trace sink its traced twin, in an NVTX range"),
        ("common/reference.cpp", ["reference_forward"], "the fp64 reference every step is checked against"),
    ],
    "02_fused": [
        ("common/problem.hpp", PARAMS + ["BwdParams"],
         "what the launchers take, as in step 01"),
        ("steps/02_fused/fused.cu", ["kThreads", "kWarps", "kSmemTarget", "scores_smem_bytes", "rows_per_cta"],
         "how many rows of S fit in shared memory"),
        ("steps/02_fused/fused.cu", ["scores_softmax_kernel"], "S and its softmax in one kernel: S stays on chip"),
        ("steps/02_fused/fused.cu", ["ds_fused_kernel"], "dP, D and dS in one kernel: dP stays on chip"),
        ("common/cuda_utils.cuh", ["kWarpSize", "warp_sum", "warp_max"], "the warp reductions, as in step 01"),
        ("steps/02_fused/fused.cu", ["launch_scores_softmax", "fused_forward", "fused_backward"],
         "the launchers: R rows of S per CTA, and step 01's kernels for O = PV, dV, dQ and dK"),
        ("common/recorder/device.cuh", ["kF", "global_timer", "sm_id", "CtaTracer", "FS_TRACE_EVENT"],
         "tracing, as in step 01"),
        ("common/recorder/launch.cuh", ["allow_dynamic_smem", "launch"],
         "a launch, plain or traced; above 48 KiB of shared memory the kernel opts in to more"),
    ],
    "03_tiled": [
        ("common/problem.hpp", PARAMS,
         "what the launcher takes, and the kernel too, by value (step 01's lesson says which fields are later steps')"),
        ("common/flash_tile.cuh", ["RowTile", "DefaultRowTile"],
         "the tile: a CTA's query rows, R rows × DC columns a thread, Bc keys a tile (measured, and step 04's too)"),
        ("steps/03_tiled/tiled.cu", ["TiledTile", "tiled_forward_kernel"], "the kernel: two passes over K, then V"),
        ("common/flash_tile.cuh", ["kLog2e", "kLn2", "load_q_rows", "row_scores", "mask_scores", "row_max",
                                   "accumulate_pv", "store_row"],
         "the tile helpers it calls (and steps 04-06 too): q in log2 units, S = qKᵀ, the masks, O += PV, O, LSE out"),
        ("common/tile_policies.cuh", ["DenseWalk"], "which key tiles a CTA visits"),
        ("common/cuda_utils.cuh", ["cp_async_16", "cp_async_commit", "cp_async_wait", "load_rows_async"],
         "tiles into shared memory with cp.async"),
        ("steps/03_tiled/tiled.cu", ["launch", "tiled_forward"],
         "the launcher: the grid, two stages of K and V in shared memory, causal or not"),
        ("common/flash_tile.cuh", ["is_compiled_head_dim", "dispatch_head_dim"],
         "the head dimensions the kernels are compiled for, and the switch that picks one"),
        ("common/recorder/device.cuh", ["kF", "global_timer", "sm_id", "CtaTracer", "FS_TRACE_EVENT"],
         "tracing, as in step 01"),
        ("common/recorder/launch.cuh", ["allow_dynamic_smem", "launch"], "a launch, plain or traced"),
    ],
    "04_online_softmax": [
        ("common/problem.hpp", PARAMS,
         "what the launcher and the kernel take (step 01's lesson says which fields are later steps')"),
        ("common/flash_tile.cuh", ["RowTile", "DefaultRowTile"], "the tile, as in step 03"),
        ("steps/04_online_softmax/flash2_forward.cuh", ["Flash2Tile", "flash2_forward_kernel"],
         "fa2: one pass, the running max and normaliser, O rescaled by α = e^(m − m_new)"),
        ("common/flash_tile.cuh", ["kLog2e", "kLn2", "load_q_rows", "row_scores", "mask_scores", "row_max",
                                   "accumulate_pv", "store_row"],
         "the tile helpers, as in step 03"),
        ("common/tile_policies.cuh", ["DenseWalk", "KeepAll", "NoDropout", "NoChain", "SeqSpan", "NoFeatures"],
         "the three policy objects it takes, plain here (KeepAll and NoChain: what NoDropout and NoFeatures hand "
         "back): steps 05 and 06 pass their own walks and dropout; SeqSpan, the CTA's queries and keys"),
        ("common/flash_features.cuh", ["SoftcapChain", "FlashFeaturesOf", "FlashFeatures", "FlashFeaturesNoCap"],
         "the Features a run with FlashAttention's interface gets: softcap, ALiBi, a window, K and V of their own "
         "shape, packed sequences"),
        ("common/problem.hpp", ["window_lo", "window_end", "TileRun", "clip_tiles"],
         "a window's reach over tiles, which the IO models share"),
        ("common/cuda_utils.cuh", ["cp_async_16", "cp_async_commit", "cp_async_wait", "load_rows_async"],
         "tiles into shared memory with cp.async"),
        ("steps/04_online_softmax/flash.cu", ["launch", "flash_forward"],
         "the launchers: the variant, then the policies a run's features need, per head dimension"),
        ("steps/04_online_softmax/flash2_forward.cuh", ["launch_flash2"],
         "fa2's launch: grid (query tiles, B·H, sequences), two stages of K and V"),
        ("steps/04_online_softmax/flash_params.hpp", ["span_rows", "fp32_strides", "fill_forward_strides",
                                                      "with_strides"],
         "the tensors' layouts, checked and filled in before the launch; where a CTA's rows start"),
        ("common/flash_tile.cuh", ["is_compiled_head_dim", "dispatch_head_dim"],
         "the head dimensions compiled, and the switch that picks one"),
        ("common/recorder/device.cuh", ["kF", "global_timer", "sm_id", "CtaTracer", "FS_TRACE_EVENT", "FS_TRACE_STATS"],
         "tracing, with the sampled row's running m and ℓ"),
        ("common/recorder/launch.cuh", ["kTracedAt", "allow_dynamic_smem", "launch"],
         "a launch, plain or traced (traced twins at the traced runs' d only)"),
        ("steps/04_online_softmax/flash.cu", ["alg1_forward_kernel"],
         "alg1: Algorithm 1 as the paper writes it, O, ℓ, m in HBM"),
    ],
    "05_recompute_backward": [
        ("common/problem.hpp", PARAMS + ["BwdParams"],
         "what the launchers and the kernels take (step 01's lesson says which fields are later steps')"),
        ("steps/05_recompute_backward/backward.cuh", ["BwdTile", "kBwdStage", "kPreprocessRows", "lse_log2"],
         "the backward's tile (2 rows × 16 columns a thread), its pipeline stage, and LSE in log2 units"),
        ("common/flash_tile.cuh", ["RowTile"], "the tile, as in step 03"),
        ("steps/05_recompute_backward/backward.cuh", ["bwd_preprocess_kernel"], "D = rowsum(dO ∘ O), once per row"),
        ("steps/05_recompute_backward/backward.cuh", ["mask_probs", "DkdvSmem", "QueryRows", "load_query_stage",
                                                      "bwd_dkdv_kernel"],
         "dK, dV per key tile (and dQ by atomics), P recomputed from LSE: its shared memory, masks, query stages"),
        ("steps/05_recompute_backward/backward.cuh", ["bwd_dq_kernel"], "the deterministic dQ, per query tile"),
        ("common/flash_tile.cuh", ["kLog2e", "load_q_rows", "row_scores", "accumulate_pv"],
         "the tile helpers, as in step 03"),
        ("steps/05_recompute_backward/dropout.cuh", ["KeepBits", "PhiloxDropout"],
         "dropout as a policy object: Z regenerated from the seed wherever it is needed"),
        ("common/philox.hpp", ["FS_HOST_DEVICE", "Philox4x32", "kM0", "kM1", "kW0", "kW1", "mulhilo", "philox4x32_10",
                               "dropout_threshold", "dropout_bits"],
         "the counter-based generator behind Z"),
        ("common/tile_policies.cuh", ["DenseWalk", "KeepAll", "NoDropout", "NoChain", "SeqSpan", "NoFeatures"],
         "the plain policy objects, as in step 04"),
        ("common/flash_features.cuh", ["SoftcapChain", "FlashFeaturesOf", "FlashFeatures", "FlashFeaturesNoCap"],
         "FlashAttention's features, as in step 04; the softcap's derivative for the chain rule"),
        ("common/problem.hpp", ["window_lo", "window_end", "TileRun", "clip_tiles"], "a window's reach over tiles"),
        ("common/cuda_utils.cuh", ["kWarpSize", "warp_sum", "cp_async_16", "cp_async_commit", "cp_async_wait",
                                   "load_rows_async"],
         "warp sums and cp.async"),
        ("steps/05_recompute_backward/backward.cuh", ["launch_backward", "run_backward"], "the launchers"),
        ("steps/05_recompute_backward/backward.cu", ["recompute_backward"],
         "the backward the step runs, at the head dimension of the run"),
        ("steps/05_recompute_backward/launch.cuh", ["recompute_backward_at"],
         "at one head dimension (a translation unit each): the dropout and the features a run asks for"),
        ("steps/05_recompute_backward/backward.hpp", ["Step05Variant"], "its variants: atomic or deterministic dQ"),
        ("steps/04_online_softmax/flash_params.hpp", ["span_rows", "fp32_strides", "fill_forward_strides",
                                                      "with_strides"],
         "the tensors' layouts, as in step 04"),
        ("common/flash_tile.cuh", ["is_compiled_head_dim", "dispatch_head_dim"], "the head dimensions compiled"),
        ("common/recorder/device.cuh", ["kF", "global_timer", "sm_id", "CtaTracer", "for_each_head", "FS_TRACE_EVENT"],
         "tracing, as in step 01"),
        ("common/recorder/launch.cuh", ["kTracedAt", "allow_dynamic_smem", "launch"], "a launch, plain or traced"),
    ],
    "07_smyrf": [
        ("common/problem.hpp", PARAMS + ["BwdParams"],
         "what the launchers and the kernels take; SmyrfParams, the clustering (step 01's lesson says which other "
         "fields are later steps')"),
        ("common/smyrf.hpp", ["SmyrfGeometry", "smyrf_geometry", "kSmyrfMaxHashes", "SmyrfProjections"],
         "where a round's clusters lie in its sorted orders (host and GPU), and the rounds' projections"),
        ("steps/07_smyrf/hash.cuh", ["SmyrfProjParams", "kNormThreads", "kNormRows", "kNormSmemBytes", "kHashRows",
                                    "kHashSmemBytes", "smyrf_norms_kernel", "smyrf_hash_kernel"],
         "the clustering: XBOX+ and E2LSH hashes of every round, in double, as sort keys"),
        ("steps/07_smyrf/smyrf.hpp", ["SmyrfWorkspace"], "the forward's workspace: the orders, and the sort's buffers"),
        ("steps/07_smyrf/smyrf.cu", ["kAlign", "align_up", "sort_temp_bytes", "smyrf_workspace", "cluster_on_gpu"],
         "the clustering's launches and the sort (CUB's segmented radix sort): the orders"),
        ("steps/07_smyrf/schedule.cuh", ["launch_hashes", "launch_forward_rounds_of", "launch_forward_rounds",
                                         "dispatch_bwd_rows", "launch_backward_rounds"],
         "the launches in order, with their grids (the GPU's and the CPU emulation's alike)"),
        ("steps/07_smyrf/smyrf.cu", ["require_contiguous", "smyrf_forward", "smyrf_backward"],
         "the forward and the backward the step runs"),
        ("steps/07_smyrf/gather.cuh", ["gather_rows_async", "gather_rows"],
         "the step's addition to the tile machinery: rows through an order"),
        ("steps/07_smyrf/cluster_forward.cuh", ["SmyrfRowShape", "SmyrfFwdTile", "smyrf_cta_rows",
                                                "smyrf_round_forward_kernel"],
         "one round: step 04's fa2 over a cluster's gathered rows, merged into O and LSE by the LSE rule"),
        ("steps/07_smyrf/cluster_backward.cuh", ["SmyrfBwdTile", "smyrf_bwd_rows", "gather_query_stage",
                                                 "trace_query_rows", "smyrf_round_dkdv_kernel",
                                                 "smyrf_round_dq_kernel"],
         "the backward of one round: step 05's kernels over the clusters, adding to dK, dV and dQ"),
        ("steps/05_recompute_backward/backward.cuh", ["kBwdStage", "kPreprocessRows", "DkdvSmem"],
         "step 05's pipeline stage and dK/dV shared memory, which the round kernels keep"),
        ("common/flash_tile.cuh", ["RowTile", "kLog2e", "kLn2", "row_scores", "mask_scores", "row_max",
                                   "accumulate_pv"],
         "the tile and its helpers, as in step 03"),
        ("common/cuda_utils.cuh", ["kWarpSize", "cp_async_16", "cp_async_commit", "cp_async_wait"],
         "a warp's width, and cp.async"),
        ("steps/04_online_softmax/flash_params.hpp", ["fp32_strides", "fill_forward_strides", "with_strides"],
         "the tensors' layouts, as in step 04"),
        ("common/flash_tile.cuh", ["is_compiled_head_dim", "dispatch_head_dim"], "the head dimensions compiled"),
        ("common/recorder/device.cuh", ["kF", "global_timer", "sm_id", "CtaTracer", "FS_TRACE_EVENT", "FS_TRACE_STATS"],
         "tracing, as in step 04; a round's events name rows by their slots in the orders"),
        ("common/recorder/launch.cuh", ["kTracedAt", "allow_dynamic_smem", "launch", "launch_untraced"],
         "a launch, plain or traced"),
        ("common/smyrf.cpp", ["forward_row", "smyrf_check_orders"],
         "the host reference of a query's rounds, and the check a GPU's clusters are held to"),
    ],
    "08_tensor_cores": [
        ("steps/08_tensor_cores/variants.hpp", ["TcVariantRow", "tc_variant"],
         "the variants, in one table: their names, and what each is compiled for"),
        ("steps/08_tensor_cores/forward_configs.cuh", ["R1Mma", "R2Swizzle", "R3Pipeline", "R4PInRegs", "Fa2",
                                                       "tc_forward_dispatch"],
         "the configs first: the ladder's rungs, each the one before with one technique on, fa2's tiles per head dimension, and the dispatch"),
        ("steps/08_tensor_cores/flash_tc_forward.cuh", ["FwdTraits", "tc_forward_kernel"],
         "the kernel: step 04's fa2 with S = QKᵀ and O += P̃V on mma.sync, P̃ kept in registers; what a config implies"),
        ("steps/08_tensor_cores/query_tile.cuh", ["FwdCta", "FwdLane", "tc_key_walk", "KeyWalk", "trace_softmax",
                                                  "fwd_epilogue"],
         "its schedule: the query tile, head and span a CTA takes, the lane's place, the key tiles it meets; the epilogue"),
        ("steps/08_tensor_cores/mma.cuh", ["Element", "pack_a", "ldmatrix_x4", "ldmatrix_x4_trans", "SmemTile",
                                           "LaneAddress"],
         "the instructions: mma.sync and its fragment layout, ldmatrix, the XOR swizzle, a lane's address made once"),
        ("steps/08_tensor_cores/tc_tiles.cuh", ["load_tile", "a_address", "b_k_address", "load_a", "load_b_k",
                                                "load_b_v", "a_fragments", "mma_row_tiles", "mma_row_tiles_2",
                                                "tc_next_stage"],
         "tiles into shared memory (cp.async) and fragments out of it (ldmatrix); the row tiles' products; "
         "the two-stage pipeline"),
        ("steps/08_tensor_cores/tc_softmax.cuh", ["tc_for_each", "tc_mask_tile", "tc_softmax_start", "tc_online_softmax",
                                                  "tc_dropout_tile", "tc_finish_rows"],
         "the online softmax on the accumulator fragments, which the 16-bit and the fp32 forward share"),
        ("steps/08_tensor_cores/tc_features.cuh", ["tc_scores", "CtaSpan"],
         "FlashAttention's softcap, ALiBi and window on the accumulator fragments, in the kernels' τ-less units; a CTA's span"),
        ("steps/08_tensor_cores/tc_dropout.cuh", ["TcDropout"], "step 05's dropout mask in the mma layouts"),
        ("steps/08_tensor_cores/forward_launch.cuh", ["launch_tc_forward"], "the launcher: the grid, causal or not, traced twins"),
        ("steps/08_tensor_cores/flash_tc_forward_f32.cuh", ["F32Traits", "tc_forward_f32_kernel"],
         "fp32 on the tensor cores (3xtf32): each operand a TF32 head and rest, three products"),
        ("steps/08_tensor_cores/tf32.cuh", ["mma_3x", "mma_3x_in_place"],
         "3×TF32's sums: S from zero per 8 of d, P̃V per key tile"),
        ("steps/08_tensor_cores/backward_configs.cuh", ["Fa2Dkdv", "Fa2DkdvSmem", "Fa2Dq", "Bwd", "KeyWarps",
                                                        "tc_backward_passes", "tc_backward_dispatch"],
         "the backward's configs, its passes and the dispatch"),
        ("steps/08_tensor_cores/preprocess_convert.cuh", ["tc_bwd_preprocess_kernel", "tc_dq_convert_kernel"],
         "the backward's first and last kernels: D on the tensor cores in dP's order, and dQ from dQacc"),
        ("steps/08_tensor_cores/key_tile.cuh", ["DkdvCta", "DkdvSmemLayout", "DkdvHead", "tc_load_bwd_stage",
                                                "tc_add_dq_share"],
         "the dK/dV kernels' schedule: a key tile, the query heads of its group and their tiles, dQ's share by atomics"),
        ("steps/08_tensor_cores/tc_dkdv_kernel.cuh", ["tc_dkdv_kernel"],
         "the dK/dV kernel of 16-key warps (key_warps; fa2 at d = 32, 96, 256): Sᵀ and dPᵀ per warp, Pᵀ and dSᵀ fed to dV and dK from the accumulators"),
        ("steps/08_tensor_cores/bwd_common.cuh", ["tc_prob", "tc_p_ds_pair"],
         "P recomputed as the forward rounded it, and dS"),
        ("steps/08_tensor_cores/flash_tc_backward.cuh", ["tc_dkdv_smem_kernel"],
         "fa2's at d = 64 and 128, FlashAttention-2's warp layout: 32 keys × a share of the queries per warp, P and dS through shared memory, the same sums bit for bit"),
        ("steps/08_tensor_cores/tc_dq_kernel.cuh", ["tc_dq_kernel"], "the deterministic dQ, in the forward's orientation"),
        ("steps/08_tensor_cores/flash_tc_backward_f32.cuh", ["tc_dkdv_f32_kernel"],
         "3xtf32's backward: tc_dkdv_kernel's 16-key warps in fp32, the forward's operand paths, dS transposed through shared memory for dQ"),
        ("steps/08_tensor_cores/variants.hpp", ["TcVariant", "is_ladder_head_dim"],
         "the variants' ids, and the head dimensions the ladder's rungs are compiled at"),
        ("steps/08_tensor_cores/launchers.cuh", ["KernelTraits", "kNoDropout", "with_bool", "with_features",
                                                 "with_dropout_and_features", "FeaturesOf"],
         "from a run's flags to template arguments: dropout on or off, and the features a run asks for"),
        ("steps/08_tensor_cores/flash_tc_forward.cuh", ["Tc16Forward"], "the kernel as a family the launcher takes"),
        ("steps/08_tensor_cores/mma.cuh", ["FS_TC_MMA_ASM", "ElementPair", "exp2_fast", "smem_address"],
         "the rest of the instructions' layer: the mma's inline assembly, a pair of elements in one register, "
         "ex2.approx, a shared-memory address"),
        ("steps/08_tensor_cores/tc_tiles.cuh", ["RowChecks", "head_cols", "load_tile_cols", "load_chunk_elements",
                                                "store_pair"],
         "whether a tile's loads check rows against N; any head dimension d, in the next compiled one's tiles, zero past d"),
        ("steps/08_tensor_cores/head_dims.hpp", ["kMaxHeadDim", "is_tc_head_dim", "tc_compiled_head_dim",
                                                 "tc_dq_acc_cols"],
         "the head dimensions compiled, and the one that runs d"),
        ("steps/08_tensor_cores/tc_features.cuh", ["TcSoftcapChain", "TcNoChain", "Rows"],
         "the softcap's chain factor kept per fragment for the backward, and which of a lane's rows a mask reads"),
        ("steps/08_tensor_cores/tc_dropout.cuh", ["Z2"], "two keep bits of Z at once"),
        ("common/problem.hpp", PARAMS + ["kTracedHeadDim"],
         "what every launcher takes, as in step 04 (step 01's lesson says what each field is)"),
        ("common/problem.hpp", ["window_lo", "window_end", "TileRun", "clip_tiles"], "a window's reach over tiles, as in step 04"),
        ("common/tile_policies.cuh", ["DenseWalk", "NoChain", "SeqSpan", "NoFeatures"], "the plain policy objects, as in step 04"),
        ("common/flash_features.cuh", ["SoftcapChain", "FlashFeaturesOf", "FlashFeatures", "FlashFeaturesNoCap"],
         "FlashAttention's features, as in step 04"),
        ("common/flash_tile.cuh", ["kLog2e"], "log₂ e, for scores in base-2 units"),
        ("common/philox.hpp", ["FS_HOST_DEVICE", "Philox4x32", "kM0", "kM1", "kW0", "kW1", "mulhilo", "philox4x32_10",
                               "dropout_threshold", "dropout_bits"],
         "the counter-based generator behind dropout's Z, as in step 05"),
        ("common/cuda_utils.cuh", ["cp_async_16", "cp_async_commit", "cp_async_wait", "FS_NOINLINE"],
         "cp.async, as in step 04; a slow path kept out of line"),
        ("common/recorder/device.cuh", ["global_timer", "sm_id", "CtaTracer", "FS_TRACE_EVENT", "FS_TRACE_STATS"],
         "tracing, as in step 04"),
        ("common/recorder/launch.cuh", ["kTracedAt", "allow_dynamic_smem", "launch"], "a launch, plain or traced, as in step 04"),
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
        ("steps/09_hopper/variants.hpp", ["HopperVariant", "kHopperVariants", "kLadderHeadDim"],
         "the variants' ids, and the head dimension the rungs and fp8 are compiled at"),
        ("steps/09_hopper/configs.cuh", ["forward_dispatch"], "the forward's dispatch: the variant's config, then its kernel"),
        ("steps/09_hopper/rung_wgmma.cuh", ["WgmmaConfig"], "the wgmma rung's config: no producer, the copies its own"),
        ("steps/09_hopper/hopper.cuh", ["smem_u32", "fence_barrier_init", "kSuspendHintNs", "tma_prefetch_descriptor",
                                        "setmaxnreg_dec", "setmaxnreg_inc", "wgmma_fence", "wgmma_commit", "wgmma_wait",
                                        "kIsFp8", "Major", "FS_WGMMA_SS", "FS_WGMMA_SS8", "FS_WGMMA_RS", "FS_WGMMA_RS8"],
         "the rest of the machinery: shared-memory addresses, the barriers' fence and wait hint, registers handed "
         "between warpgroups, wgmma's fence, commit and wait, and its operand lists"),
        ("steps/09_hopper/hopper.cu", ["encode_tiled", "sm_count"], "the driver's encoder, and the SMs a persistent grid fills"),
        ("steps/08_tensor_cores/mma.cuh", ["FS_TC_MMA_ASM", "ElementPair", "Element", "exp2_fast"],
         "from step 08: the element types' conversions and ex2.approx"),
        ("steps/08_tensor_cores/tc_softmax.cuh", ["tc_mask_tile", "tc_finish_rows"],
         "from step 08: the mask on a fragment's scores and the rows' O / ℓ and LSE"),
        ("common/problem.hpp", PARAMS, "what every launcher takes, as in step 04"),
        ("common/flash_tile.cuh", ["kLog2e"], "log₂ e, for scores in base-2 units"),
        ("common/recorder/device.cuh", ["global_timer", "sm_id", "CtaTracer", "FS_TRACE_EVENT"], "tracing, as in step 04"),
        ("common/recorder/launch.cuh", ["allow_dynamic_smem", "launch"], "a launch, plain or traced, as in step 04"),
    ],
    "06_block_sparse": [
        ("common/problem.hpp", PARAMS + ["BwdParams"],
         "what the launchers and the kernels take; BlockSparse, the mask's lists as the kernels walk them"),
        ("steps/06_block_sparse/block_list_walk.cuh", ["BlockListWalk"],
         "the step's addition: a walk over the nonzero blocks of the mask"),
        ("steps/06_block_sparse/block_sparse.cu", ["block_sparse_forward", "block_sparse_backward"],
         "steps 04 and 05's kernels, instantiated with it"),
        ("steps/04_online_softmax/flash2_forward.cuh", ["Flash2Tile", "flash2_forward_kernel", "launch_flash2"],
         "step 04's forward and its launch: the walk decides which key tiles its loop visits"),
        ("steps/05_recompute_backward/backward.cuh", ["BwdTile", "kBwdStage", "kPreprocessRows", "lse_log2",
                                                      "bwd_preprocess_kernel", "mask_probs", "DkdvSmem", "QueryRows",
                                                      "load_query_stage", "bwd_dkdv_kernel", "bwd_dq_kernel",
                                                      "launch_backward", "run_backward"],
         "step 05's backward and its launchers: the walk gives the dK/dV kernel its query tiles, the dQ kernel its "
         "key tiles"),
        ("steps/05_recompute_backward/backward.hpp", ["Step05Variant"], "atomic or deterministic dQ"),
        ("steps/05_recompute_backward/dropout.cuh", ["KeepBits", "PhiloxDropout"], "step 05's dropout"),
        ("common/philox.hpp", ["FS_HOST_DEVICE", "Philox4x32", "kM0", "kM1", "kW0", "kW1", "mulhilo", "philox4x32_10",
                               "dropout_threshold", "dropout_bits"],
         "the generator behind the dropout mask"),
        ("common/flash_tile.cuh", ["RowTile", "DefaultRowTile", "kLog2e", "kLn2", "load_q_rows", "row_scores",
                                   "mask_scores", "row_max", "accumulate_pv", "store_row"],
         "the tile and its helpers, as in step 03"),
        ("common/tile_policies.cuh", ["DenseWalk", "KeepAll", "NoDropout", "NoChain", "SeqSpan", "NoFeatures"],
         "the plain policy objects, as in step 04 (DenseWalk is the walk BlockListWalk replaces)"),
        ("common/cuda_utils.cuh", ["kWarpSize", "warp_sum", "cp_async_16", "cp_async_commit", "cp_async_wait",
                                   "load_rows_async"],
         "warp sums and cp.async"),
        ("steps/04_online_softmax/flash_params.hpp", ["span_rows", "fp32_strides", "fill_forward_strides",
                                                      "with_strides"],
         "the tensors' layouts, as in step 04"),
        ("common/flash_tile.cuh", ["is_compiled_head_dim", "dispatch_head_dim"], "the head dimensions compiled"),
        ("common/recorder/device.cuh", ["kF", "global_timer", "sm_id", "CtaTracer", "for_each_head", "FS_TRACE_EVENT",
                                        "FS_TRACE_STATS"],
         "tracing, as in step 04; a walk's skipped blocks are events too"),
        ("common/recorder/launch.cuh", ["kTracedAt", "allow_dynamic_smem", "launch"], "a launch, plain or traced"),
        ("common/block_mask.cpp", ["make_pattern", "to_lists"], "the masks, and their lists in CSR and CSC form"),
        ("steps/06_block_sparse/block_sparse.cu", ["mask_unsupported", "io_block_sparse_forward"],
         "which blocks the kernels' tiles allow; the IO model over the lists"),
    ],
    "10_decode": [
        ("steps/10_decode/decode.hpp", ["kRowsPerCta", "kMaxNewTokens", "DecodeShape", "DecodeParams"],
         "the step's own problem and parameters: q, the KV cache, the lengths per sequence, the splits and their "
         "workspace (not common/problem.hpp's FwdParams)"),
        ("steps/10_decode/decode_cta.cuh", ["DecodeCta", "decode_mask", "decode_scores"],
         "the schedule: a CTA's 16 rows (query heads of one K/V head × new tokens), its split's key tiles, the "
         "masks at the bottom-right corner (causal, a window) and the softcap and ALiBi on the scores"),
        ("steps/10_decode/key_range.hpp", ["visible_end", "visible_begin", "CtaKeys"],
         "the keys a row sees and a CTA walks, one rule for the kernel and the IO model"),
        ("steps/10_decode/split_rule.hpp", ["SplitTiles", "split_tiles"], "how a split's tiles are dealt"),
        ("steps/10_decode/flash_decode.cuh", ["decode_split_kernel"],
         "the split kernel: Q once, K and V through the stages, each warp its own keys, step 08's softmax per warp"),
        ("steps/10_decode/kv_cache.cuh", ["append_base", "sequence_keys", "cache_sequence", "ContiguousCache",
                                          "PagedCache", "load_rows", "TileRows"],
         "the keys a sequence holds (+ n when appending), the cache's sequence it reads (cache_batch_idx), where a "
         "key's row is, contiguous or through the block table of a paged cache (one function each), and tiles of "
         "such rows by cp.async, an address per row, computed before the wait"),
        ("steps/10_decode/append.cuh", ["kAppendThreads", "append_chunks", "append_chunk", "decode_append_kernel"],
         "the append: the new tokens' k and v written into the cache through the same row(), 16 bytes a thread, "
         "the keys and q turned by the rotary embedding on the way"),
        ("steps/10_decode/rotary.hpp", ["RotaryPair", "rotary_pair", "rotary_value"],
         "the rotary embedding's pairs and turn, one function for kernel, emulation and reference"),
        ("steps/10_decode/decode_configs.cuh", ["DecodeConfig", "DecodeTraits"],
         "the tiles and stages per head dimension, as named fields, and what they imply"),
        ("steps/10_decode/decode.hpp", ["partials_bytes"], "the workspace's partial results: d + 1 floats per split and row"),
        ("steps/10_decode/flash_decode.cuh", ["merge_warps"],
         "the end of a split: the warps' (m, ℓ, O) merged through shared memory, O and LSE written"),
        ("steps/10_decode/combine.cuh", ["kCombineWarps", "decode_combine_kernel"],
         "the combine: a warp per row merges the splits by their log-sum-exp"),
        ("steps/10_decode/decode_launch.cuh", ["kTraced", "launch_split", "launch_decode"],
         "the launcher: the append, the grid, the split kernel for a contiguous or a paged cache, the combine"),
        ("steps/10_decode/decode_io.hpp", ["decode_tile_keys"], "the tile's keys as host code knows them (the IO model)"),
        ("common/recorder/device.cuh", ["kF", "global_timer", "sm_id", "CtaTracer", "FS_TRACE_EVENT"],
         "tracing, as in step 04: one thread per CTA records the end of each phase"),
        ("common/recorder/launch.cuh", ["kTracedAt", "allow_dynamic_smem", "launch"], "a launch, plain or traced"),
        ("common/problem.hpp", ["kTracedHeadDim"], "the one head dimension traced twins are compiled at"),
        ("steps/10_decode/decode_trace.cuh", ["cache_slot", "for_each_slot_run", "for_each_query_run", "trace_q",
                                              "trace_kv_tile", "trace_compute", "trace_split_result", "trace_append",
                                              "trace_combine"],
         "what the kernels record: the cache's rows as slots, a load per run of a page, the partials and the merge"),
        ("steps/10_decode/decode.hpp", ["rotary_q_offset"], "where the turned queries sit in the workspace"),
        ("steps/08_tensor_cores/tc_softmax.cuh", ["tc_softmax_start", "tc_online_softmax"],
         "step 08's online softmax, run by each warp on its own keys"),
        ("steps/08_tensor_cores/tc_tiles.cuh", ["a_address", "b_k_address", "load_a", "load_b_k", "load_b_v",
                                                 "a_fragments", "mma_row_tiles"],
         "step 08's fragment reads and the product over a row tile"),
        ("steps/08_tensor_cores/mma.cuh", ["ElementPair", "Element", "FS_TC_MMA_ASM", "pack_a", "exp2_fast",
                                           "smem_address", "ldmatrix_x4", "ldmatrix_x4_trans", "SmemTile", "kSwizzled",
                                           "LaneAddress"],
         "step 08's instructions: mma.sync, ldmatrix, the swizzled tile, a lane's address in it"),
        ("common/cuda_utils.cuh", ["kWarpSize", "warp_sum", "warp_max", "cp_async_16", "cp_async_commit",
                                   "cp_async_wait", "grid_dependents_launch", "grid_dependency_wait"],
         "the warp reductions of the combine, cp.async, and the programmatic dependent launch's two instructions"),
        ("common/flash_tile.cuh", ["kLog2e"], "log₂ e, for scores in base-2 units"),
        ("common/problem.hpp", ["as", "ScoreMods"], "a tensor's pointer as its element type; the window, softcap and "
                                                   "ALiBi as every step takes them"),
        ("common/recorder/launch.cuh", ["launch_dependent"],
         "the combine's launch, as the split kernel's dependent (programmatic dependent launch)"),
    ],
}

# lesson → [(file, [symbols])]: the lesson's kernels (its __global__ functions) and the launchers
# that launch them, where its coverage is measured from (see above). Step 06 adds a walk to steps 04
# and 05's kernels: those are its kernels. Steps 08 and 09 start at the dispatch that picks a head
# dimension's configuration (fa2's or fa3's tiles, the rungs), so that their configs count.
MAIN = {
    "01_naive": [
        ("steps/01_naive/naive.cu", ["scores_kernel", "softmax_kernel", "pv_kernel", "dv_kernel", "dp_kernel",
                                     "rowdot_kernel", "ds_kernel", "dq_kernel", "dk_kernel",
                                     "naive_forward", "naive_backward"]),
    ],
    "02_fused": [
        ("steps/02_fused/fused.cu", ["scores_softmax_kernel", "ds_fused_kernel", "fused_forward", "fused_backward"]),
    ],
    "03_tiled": [
        ("steps/03_tiled/tiled.cu", ["tiled_forward_kernel", "tiled_forward"]),
    ],
    "04_online_softmax": [
        ("steps/04_online_softmax/flash2_forward.cuh", ["flash2_forward_kernel"]),
        ("steps/04_online_softmax/flash.cu", ["flash_forward"]),
    ],
    "05_recompute_backward": [
        ("steps/05_recompute_backward/backward.cuh", ["bwd_preprocess_kernel", "bwd_dkdv_kernel", "bwd_dq_kernel"]),
        ("steps/05_recompute_backward/backward.cu", ["recompute_backward"]),
    ],
    "06_block_sparse": [
        ("steps/04_online_softmax/flash2_forward.cuh", ["flash2_forward_kernel"]),
        ("steps/05_recompute_backward/backward.cuh", ["bwd_preprocess_kernel", "bwd_dkdv_kernel", "bwd_dq_kernel"]),
        ("steps/06_block_sparse/block_sparse.cu", ["block_sparse_forward", "block_sparse_backward"]),
    ],
    "07_smyrf": [
        ("steps/07_smyrf/hash.cuh", ["smyrf_norms_kernel", "smyrf_hash_kernel"]),
        ("steps/07_smyrf/cluster_forward.cuh", ["smyrf_round_forward_kernel"]),
        ("steps/07_smyrf/cluster_backward.cuh", ["smyrf_round_dkdv_kernel", "smyrf_round_dq_kernel"]),
        ("steps/07_smyrf/smyrf.cu", ["smyrf_forward", "smyrf_backward"]),
    ],
    "08_tensor_cores": [
        ("steps/08_tensor_cores/flash_tc_forward.cuh", ["tc_forward_kernel"]),
        ("steps/08_tensor_cores/forward_configs.cuh", ["tc_forward_dispatch"]),
    ],
    "09_hopper": [
        ("steps/09_hopper/flash_hopper_forward.cuh", ["hopper_forward_kernel"]),
        ("steps/09_hopper/configs.cuh", ["forward_dispatch"]),
    ],
    "10_decode": [
        ("steps/10_decode/flash_decode.cuh", ["decode_split_kernel"]),
        ("steps/10_decode/combine.cuh", ["decode_combine_kernel"]),
        ("steps/10_decode/decode_launch.cuh", ["launch_decode"]),
    ],
}

# The helpers of common/ in the index beside steps/ (its .cu, .cuh, .hpp and .cpp files): the
# problem and its parameters, the device helpers (warp sums, cp.async, the tile machinery and its
# policy objects, FlashAttention's features), Philox, the device side of tracing and the launch,
# SMYRF's cluster geometry and FP8's constants. Not in it: the harness (host code: buffers, CLI,
# timing, checks, the fp64 reference), the trace's record format (common/trace/) and the CPU
# emulator (common/emulator/), none of which a reader opens to follow a kernel.
COMMON = ["common/problem.hpp", "common/cuda_utils.cuh", "common/flash_tile.cuh", "common/tile_policies.cuh",
          "common/flash_features.cuh", "common/philox.hpp", "common/recorder/device.cuh", "common/recorder/launch.cuh",
          "common/smyrf.hpp", "common/e4m3.hpp"]
INDEXED = (".cu", ".cuh", ".hpp", ".cpp")

# The share of what its kernels use that a lesson's reading path must list (--check), and lessons
# held to less for a while (none now: steps 08 and 09 were, until their kernels were split into
# roles and their paths listed all they use).
THRESHOLD = 0.9
FLOOR = {}

# lesson → [(title, before, after)], each side a list of (file, symbol): the symbols' text,
# concatenated, diffed; written under the title into steps/<lesson>/DIFF.md, which the lesson's
# <!-- diff --> block links to in one line per diff.
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
         [("steps/05_recompute_backward/launch.cuh", "recompute_forward_at")]),
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
        ("the ladder, rung by rung: what r2_swizzle adds to r1_mma's config",
         [("steps/08_tensor_cores/forward_configs.cuh", "R1Mma")],
         [("steps/08_tensor_cores/forward_configs.cuh", "R1Mma"), ("steps/08_tensor_cores/forward_configs.cuh", "R2Swizzle")]),
        ("what r3_pipeline adds to r2_swizzle's",
         [("steps/08_tensor_cores/forward_configs.cuh", "R2Swizzle")],
         [("steps/08_tensor_cores/forward_configs.cuh", "R2Swizzle"), ("steps/08_tensor_cores/forward_configs.cuh", "R3Pipeline")]),
        ("what r4_p_in_regs adds to r3_pipeline's",
         [("steps/08_tensor_cores/forward_configs.cuh", "R3Pipeline")],
         [("steps/08_tensor_cores/forward_configs.cuh", "R3Pipeline"), ("steps/08_tensor_cores/forward_configs.cuh", "R4PInRegs")]),
        ("what fa2 takes from r4_p_in_regs: its tiles per head dimension",
         [("steps/08_tensor_cores/forward_configs.cuh", "R4PInRegs")],
         [("steps/08_tensor_cores/forward_configs.cuh", "R4PInRegs"), ("steps/08_tensor_cores/forward_configs.cuh", "Fa2")]),
        ("the backward's rung: key_warps' dK/dV kernel → fa2's at d = 64 and 128 (FlashAttention-2's warp layout)",
         [("steps/08_tensor_cores/tc_dkdv_kernel.cuh", "tc_dkdv_kernel")],
         [("steps/08_tensor_cores/flash_tc_backward.cuh", "tc_dkdv_smem_kernel")]),
        ("step 05's dQ kernel → step 08's (the deterministic dQ on tensor cores)",
         [("steps/05_recompute_backward/backward.cuh", "bwd_dq_kernel")],
         [("steps/08_tensor_cores/tc_dq_kernel.cuh", "tc_dq_kernel")]),
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
    "10_decode": [
        ("step 08's tensor-core forward → step 10's split kernel (16 packed rows, warps split the keys, the merge)",
         [("steps/08_tensor_cores/flash_tc_forward.cuh", "tc_forward_kernel")],
         [("steps/10_decode/flash_decode.cuh", "decode_split_kernel")]),
    ],
    "06_block_sparse": [
        ("the forward: step 05's launch → step 06's (the walk is the difference)",
         [("steps/05_recompute_backward/launch.cuh", "recompute_forward_at")],
         [("steps/06_block_sparse/block_sparse.cu", "block_sparse_forward")]),
        ("the backward: step 05's → step 06's",
         [("steps/05_recompute_backward/launch.cuh", "recompute_backward_at")],
         [("steps/06_block_sparse/block_sparse.cu", "block_sparse_backward")]),
    ],
}

READING_MARKER = re.compile(r"(<!-- reading:(?P<id>[\w]+) -->\n)(?P<body>.*?)(<!-- /reading -->)", re.S)
DIFF_MARKER = re.compile(r"(<!-- diff:(?P<id>[\w]+) -->\n)(?P<body>.*?)(<!-- /diff -->)", re.S)


def read_lines(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read().split("\n")


# ---------------------------------------------------------------------------------------------
# The definitions of a source file
# ---------------------------------------------------------------------------------------------
#
# Not a C++ parser: a scan of the tokens at namespace scope, enough for this tree's style. Comments,
# string and character literals are blanked first (asm strings hold braces), preprocessor lines are
# read apart (#define is a definition, #include an edge), and a statement at namespace scope is what
# runs to its `;` or, for a function, to the `}` that closes its body. What the CPU emulation alone
# compiles (#ifdef FS_EMULATION, the #else of #ifndef FS_EMULATION) is left out: a reader of the
# GPU's code does not read it.

TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.']*|::|->|==|!=|<=|>=|&&|\|\||[-+*/%&|^]=|\S")
IDENT = re.compile(r"[A-Za-z_]\w*$")
# Words before a `(` that are not the name of the function being defined.
NOT_A_NAME = {"__launch_bounds__", "__align__", "alignas", "__attribute__", "decltype", "__declspec", "noexcept",
              "sizeof", "alignof", "static_assert", "__grid_constant__"}
# Words after which a name is not being declared (`return x;`, `case k:`, `const T x`).
NOT_A_TYPE = {"return", "else", "case", "throw", "new", "delete", "sizeof", "typename", "struct", "class", "enum",
              "union", "using", "namespace", "goto", "co_return", "co_await", "co_yield", "operator", "template",
              "public", "private", "protected", "default", "do", "const", "constexpr", "static", "inline", "volatile",
              "extern", "mutable", "virtual", "explicit", "friend", "__device__", "__host__", "__global__",
              "__forceinline__", "register", "typedef", "if", "while", "for", "switch",
              "decltype", "alignof", "noexcept", "requires", "consteval", "constinit"}
CLASS_KEYS = {"struct", "class", "union", "enum"}
BUILTIN_TYPES = {"void", "bool", "char", "short", "int", "long", "float", "double", "unsigned", "signed", "auto"}


class Definition:
    """One definition (or declaration) at namespace scope: lines first..last, 1-based and inclusive,
    with its template header and the comment right above it."""

    def __init__(self, name, kind, path, first, last, namespace, decl, kernel, code, emu):
        self.name, self.kind, self.path, self.first, self.last = name, kind, path, first, last
        self.namespace = namespace  # "fs::tc", "fs::{anon}", "" (macros, the global namespace)
        self.decl = decl            # a declaration only: `void f();`, `struct S;`
        self.kernel = kernel        # a __global__ function
        self.code = code            # its code: comments, literals, preprocessor and emulation lines left out
        self.emu = emu              # compiled in the CPU emulation only

    def lines(self):
        return self.last - self.first + 1

    def where(self):
        return f"{self.path}:{self.first}-{self.last}"

    def __repr__(self):
        return f"{'declaration ' if self.decl else ''}{self.kind} {self.name} ({self.where()})"


def strip_code(lines):
    """The lines with comments and the insides of string and character literals blanked."""
    out, in_block = [], False
    for line in lines:
        res, i, n = [], 0, len(line)
        while i < n:
            if in_block:
                end = line.find("*/", i)
                in_block, i = (True, n) if end < 0 else (False, end + 2)
                continue
            if line.startswith("//", i):
                break
            if line.startswith("/*", i):
                in_block, i = True, i + 2
                continue
            c = line[i]
            if c in "\"'":
                j = i + 1
                while j < n and line[j] != c:
                    j += 2 if line[j] == "\\" else 1
                res.append(c + c)
                i = j + 1
                continue
            res.append(c)
            i += 1
        out.append("".join(res))
    return out


def emulation_lines(lines):
    """For each line, whether only the CPU emulation compiles it (FS_EMULATION defined)."""
    stack, out = [], []  # per open #if: True (emulation only), False (never in the emulation), None
    for line in lines:
        m = re.match(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)", line)
        if m:
            what, cond = m.group(1), m.group(2).split("//")[0].strip()
            if what in ("if", "ifdef", "ifndef"):
                on = (what, cond) in (("ifdef", "FS_EMULATION"), ("if", "defined(FS_EMULATION)"))
                off = (what, cond) in (("ifndef", "FS_EMULATION"), ("if", "!defined(FS_EMULATION)"))
                stack.append(True if on else False if off else None)
            elif what == "elif" and stack:
                stack[-1] = None
            elif what == "else" and stack and stack[-1] is not None:
                stack[-1] = not stack[-1]
            elif what == "endif" and stack:
                stack.pop()
        out.append(True in stack)
    return out


class Source:
    """A file's definitions at namespace scope and the files it includes."""

    def __init__(self, path):
        self.path = path
        self.lines = read_lines(path)
        self.code = strip_code(self.lines)
        self.emu = emulation_lines(self.lines)
        self.preproc, continued = [], False
        for c in self.code:
            self.preproc.append(continued or c.lstrip().startswith("#"))
            continued = self.preproc[-1] and c.rstrip().endswith("\\")
        self.includes = []
        for i, line in enumerate(self.lines):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m and not self.emu[i]:
                self.includes += [p for p in [self.resolve_include(m.group(1))] if p]
        self.defs = []
        self.parse_macros()
        self.parse()

    def resolve_include(self, name):
        for base in (ROOT, os.path.join(ROOT, os.path.dirname(self.path))):
            p = os.path.normpath(os.path.join(base, name))
            if os.path.isfile(p):
                return os.path.relpath(p, ROOT)
        return None

    def first_line(self, line):
        """The first line (0-based) of a definition whose code starts at `line`: the comment right
        above it, read across an #if that opens between the comment and the definition."""
        first, j = line, line - 1
        while j >= 0:
            s = self.lines[j].strip()
            if s.startswith("//"):
                first = j
            elif not (re.match(r"#\s*if", s) and j > 0 and self.lines[j - 1].strip().startswith("//")):
                break
            j -= 1
        return first

    def code_of(self, a, b):
        return "\n".join(self.code[i] for i in range(a, b + 1) if not self.emu[i] and not self.preproc[i])

    def add(self, name, kind, first, last, namespace, decl=False, kernel=False, code=None):
        code = self.code_of(first, last) if code is None else code
        self.defs.append(Definition(name, kind, self.path, self.first_line(first) + 1, last + 1, namespace, decl,
                                    kernel, code, self.emu[first]))

    def parse_macros(self):
        for i, c in enumerate(self.code):
            m = re.match(r"\s*#\s*define\s+([A-Za-z_]\w*)(\([^)]*\))?", c)
            if m and not (i and self.preproc[i - 1] and self.code[i - 1].rstrip().endswith("\\")):
                j = i
                while self.code[j].rstrip().endswith("\\") and j + 1 < len(self.code):
                    j += 1
                body = "\n".join([c[m.end():]] + self.code[i + 1:j + 1])
                self.add(m.group(1), "macro", i, j, "", code=body)

    def parse(self):
        toks = [(m.group(0), i) for i, c in enumerate(self.code) if not self.preproc[i] for m in TOKEN.finditer(c)]
        ns, scopes = [], []   # the namespaces we are in; what each open `{` at namespace scope is
        stmt = []             # the tokens of the statement at namespace scope being read
        depth = paren = 0     # braces inside the statement's body; parentheses and brackets in its head
        body_closed = False   # a class's or an initialiser's body has closed: the statement ends at its `;`
        for k, (t, line) in enumerate(toks):
            if depth:
                depth += (t == "{") - (t == "}")
                if depth == 0:
                    stmt.append((t, line))
                    if self.ends_at_brace(stmt):
                        self.finish(stmt, ns, True)
                        stmt = []
                    else:
                        body_closed = True
                continue
            paren += (t in "([") - (t in ")]")
            if paren or t in ")]":
                stmt.append((t, line))
                nxt = toks[k + 1] if k + 1 < len(toks) else (";", -1)
                if not paren and self.macro_call(stmt) and nxt[1] > line and nxt[0] != ";":
                    stmt = []  # FS_SOMETHING(x) on a line of its own: a macro's use, not a definition
                continue
            words = [w for w, _ in stmt]
            if t == "{" and words[:1] == ["namespace"]:
                ns.append("::".join(w for w in words[1:] if IDENT.match(w)) or "{anon}")
                scopes.append("namespace")
                stmt = []
            elif t == "{" and words[:1] == ["extern"] and set(words) <= {"extern", '"'}:
                scopes.append("extern")
                stmt = []
            elif t == "{":
                depth = 1
                stmt.append((t, line))
            elif t == "}":  # closes a namespace or an extern "C" block
                if scopes and scopes.pop() == "namespace":
                    ns.pop()
                stmt, body_closed = [], False
            elif t == ";":
                stmt.append((t, line))
                self.finish(stmt, ns, body_closed)
                stmt, body_closed = [], False
            else:
                stmt.append((t, line))

    @staticmethod
    def macro_call(stmt):
        return len(stmt) >= 3 and re.match(r"[A-Z][A-Z0-9_]*$", stmt[0][0]) and stmt[1][0] == "("

    @staticmethod
    def head(stmt):
        """A statement's words before its body, its template headers left out; None for an explicit
        instantiation."""
        w = [x for x, _ in stmt]
        i = 0
        while i < len(w) and w[i] == "template":
            if w[i + 1:i + 2] != ["<"]:
                return None
            level, par, i = 0, 0, i + 1
            while i < len(w):
                par += (w[i] in "([") - (w[i] in ")]")
                if not par:
                    level += (w[i] == "<") - (w[i] == ">")
                    if level == 0:
                        break
                i += 1
            i += 1
        return w[i:w.index("{")] if "{" in w[i:] else w[i:]

    def ends_at_brace(self, stmt):
        """Whether a statement ends with its body's `}`: a function does; a class, an enum and a
        braced initialiser (`= {...};`) run on to their `;`."""
        h = self.head(stmt)
        if h is None:
            return True
        if any(x in CLASS_KEYS for x in h[:4]) and "(" not in h:
            return False
        par = 0
        for x in h:
            par += (x in "([") - (x in ")]")
            if x == "=" and not par:
                return False
        return True

    def finish(self, stmt, ns, has_body):
        words = self.head(stmt)
        if not words or words[0] in ("static_assert", ";") or words[0] == "using" and "=" not in words:
            return
        first, last = stmt[0][1], stmt[-1][1]
        namespace = "::".join(ns)
        kernel = "__global__" in words
        if words[0] == "using":
            return self.add(words[1], "alias", first, last, namespace)
        if words[0] == "typedef":
            return self.add([x for x in words if IDENT.match(x)][-1], "alias", first, last, namespace)
        ck = next((j for j, x in enumerate(words[:4]) if x in CLASS_KEYS), None)
        if ck is not None and "(" not in words[:ck]:
            j = ck + 1 + (words[ck] == "enum" and words[ck + 1:ck + 2] in (["class"], ["struct"]))
            while j < len(words) and words[j] in ("alignas", "__align__"):  # alignas(16): skip to its `)`
                j = words.index(")", j) + 1
            rest = words[j + 1:]
            if j < len(words) and IDENT.match(words[j]) and (has_body or rest[:1] in ([";"], [":"], ["final"], ["<"])):
                decl = not has_body
                self.add(words[j], "type", first, last, namespace, decl=decl)
                if words[ck] == "enum" and words[ck + 1] not in ("class", "struct") and not decl:
                    text = " ".join(self.code[first:last + 1])  # an unscoped enum's enumerators are names too
                    for part in text[text.find("{") + 1:text.rfind("}")].split(","):
                        m = re.match(r"\s*([A-Za-z_]\w*)", part)
                        if m:
                            self.add(m.group(1), "enumerator", first, last, namespace)
                return
        par, call, eq = 0, None, None
        for j, x in enumerate(words):
            if x == "(" and not par and call is None and j and IDENT.match(words[j - 1]) and \
                    words[j - 1] not in NOT_A_NAME:
                call = j - 1
            par += (x in "([") - (x in ")]")
            if x == "=" and not par and eq is None:
                eq = j
        if "operator" in words and (eq is None or words.index("operator") < eq):
            o = words.index("operator")
            end = words.index("(", o + 2) if "(" in words[o + 2:] else o + 2
            return self.add("operator" + "".join(words[o + 1:end]), "function", first, last, namespace,
                            decl=not has_body)
        if call is not None and (eq is None or call < eq):
            return self.add(words[call], "function", first, last, namespace, decl=not has_body, kernel=kernel)
        cut = words[:eq] if eq is not None else words
        cut = cut[:cut.index("[")] if "[" in cut else cut
        names = [x for x in cut if IDENT.match(x)]
        if not names:
            return
        names = names[-1:] + self.more_declarators(words)
        for n in names:
            self.add(n, "variable", first, last, namespace, decl="extern" in words)

    @staticmethod
    def more_declarators(words):
        """The names after the first in `constexpr int a = 1, b = 2;`."""
        out, par, seen_eq = [], 0, False
        for j, x in enumerate(words):
            par += (x in "([{<") - (x in ")]}>")
            if x == "=" and not par:
                seen_eq = True
            elif x == "," and not par and seen_eq and j + 1 < len(words) and IDENT.match(words[j + 1]):
                out.append(words[j + 1])
        return out


_sources = {}


def source(path):
    key = os.path.join(ROOT, path)
    if key not in _sources:
        _sources[key] = Source(path)
    return _sources[key]


def definitions(path, name):
    """Every definition of `name` in `path` the GPU build compiles (overloads, specializations),
    with the declarations beside them; the declarations alone where it has no definition."""
    found = [d for d in source(path).defs if d.name == name and not d.emu]
    if not found:
        sys.exit(f"reading.py: {path}: no definition of {name}")
    return found


def find_symbol(path, name):
    """(first, last) lines, 1-based and inclusive, of the first definition of `name` in `path`: its
    template header and the comment right above it, through its closing brace (or its `;`)."""
    found = definitions(path, name)
    d = next((d for d in found if not d.decl), found[0])
    return d.first, d.last


def symbol_text(path, name):
    first, last = find_symbol(path, name)
    return read_lines(path)[first - 1:last]


def ranges(path, names):
    """Line ranges of the symbols, adjacent ones merged (a blank line apart counts as adjacent)."""
    spans = sorted((d.first, d.last) for n in names for d in definitions(path, n))
    merged = []
    for a, b in spans:
        if merged and a <= merged[-1][1] + 2:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


# ---------------------------------------------------------------------------------------------
# What a lesson's kernels use, and how much of it the reading path covers
# ---------------------------------------------------------------------------------------------

class Index:
    """The definitions of steps/ and of COMMON by name, and how a name in one resolves to others."""

    def __init__(self):
        files = []
        for dirpath, _, names in os.walk(os.path.join(ROOT, "steps")):
            files += [os.path.relpath(os.path.join(dirpath, n), ROOT) for n in names if n.endswith(INDEXED)]
        self.by_name, self.namespaces, self._included = {}, {"fs"}, {}
        for path in sorted(files) + [c for c in COMMON if os.path.isfile(os.path.join(ROOT, c))]:
            for d in source(path).defs:
                if not d.emu:
                    self.by_name.setdefault(d.name, []).append(d)
                    self.namespaces.update(p for p in d.namespace.split("::") if p)

    def included(self, path):
        """`path` and every file it includes, transitively."""
        if path not in self._included:
            seen, todo = set(), [path]
            while todo:
                p = todo.pop()
                if p not in seen:
                    seen.add(p)
                    todo += source(p).includes
            self._included[path] = seen
        return self._included[path]

    def names(self, d):
        """The names d's code uses, as (name, qualifier): qualifier None for a plain name, the
        namespace for `ns::name`. Left out: members (a.b, p->b, T::b of a type T), names d declares
        itself (its parameters and locals, a class's members), namespaces outside the index (std::)."""
        toks = TOKEN.findall(d.code)
        declared = {t for i, t in enumerate(toks[1:-1], 1) if IDENT.match(t) and self.declares(toks, i)}
        using = {toks[i + 2] for i in range(len(toks) - 2) if toks[i] == "using" and toks[i + 1] == "namespace"}
        out = set()
        for i, t in enumerate(toks):
            if not IDENT.match(t):
                continue
            prev, nxt = toks[i - 1] if i else "", toks[i + 1] if i + 1 < len(toks) else ""
            if prev in (".", "->") or prev == "template" and toks[i - 2] in (".", "->", "::"):
                continue
            if nxt == "::" and t in self.namespaces:
                continue
            if prev == "::":
                q = toks[i - 2] if i >= 2 and IDENT.match(toks[i - 2]) else ""
                if q and q not in self.namespaces:
                    continue
                out.add((t, q))
            elif t not in declared:
                out.add((t, None))
        return out, using

    @staticmethod
    def declares(toks, i):
        """Whether toks[i] is a name being declared: `T x`, `T x = ...`, `int* x`, `const T& x`, `T* x = ...`."""
        if toks[i + 1] not in ("=", ";", ",", "(", ")", "[", "{", ":"):
            return False
        j = i - 1
        if toks[j] not in ("*", "&", "&&"):
            return bool(IDENT.match(toks[j])) and toks[j] not in NOT_A_TYPE
        while j > 0 and toks[j] in ("*", "&", "&&", "const"):
            j -= 1
        return (toks[i + 1] == "=" and (IDENT.match(toks[j]) or toks[j] == ">")) or toks[j] in BUILTIN_TYPES or \
            j > 0 and toks[j - 1] == "const"

    def resolve(self, d, name, qualifier, using, unit):
        """The definitions a name in d's code stands for: those of its namespace (or one d's namespace
        is inside) in a file d's translation unit includes; for a name only declared there (a
        launcher in another .cu), the definitions in the files that include that declaration."""
        def ns_of(c):
            return [p for p in c.namespace.split("::") if p and p != "{anon}"]
        here = [p for p in d.namespace.split("::") if p and p != "{anon}"]
        cands = self.by_name.get(name, [])
        if qualifier is not None:
            cands = [c for c in cands if (ns_of(c) or [""])[-1] == qualifier]
        else:
            cands = [c for c in cands if c.kind == "macro" or ns_of(c) == here[:len(ns_of(c))] or
                     ns_of(c) and ns_of(c)[-1] in using]
        seen = self.included(d.path) | unit
        found = [c for c in cands if not c.decl and c.path in seen]
        if found:  # the innermost namespace that has the name hides the outer ones
            inner = max(len(ns_of(c)) for c in found if c.kind != "macro") if qualifier is None and \
                any(c.kind != "macro" for c in found) else 0
            return [c for c in found if c.kind == "macro" or qualifier is not None or len(ns_of(c)) == inner or
                    ns_of(c) and ns_of(c)[-1] in using]
        declared = {c.path for c in cands if c.decl and c.path in seen}
        return [c for c in cands if declared and not c.decl and "{anon}" not in c.namespace and
                self.included(c.path) & declared]

    def closure(self, roots):
        """The definitions `roots` use, transitively. The kernels among the roots are the lesson's;
        other kernels are left out, and so are the definitions that name one of them and lead to
        none of the lesson's (the launchers of other variants). Declarations count for nothing."""
        kernels = {r for r in roots if r.kernel}
        unit = set().union(*(self.included(r.path) for r in roots))
        edges, todo = {}, list(roots)
        while todo:
            d = todo.pop()
            if d in edges:
                continue
            edges[d] = set()
            if d.kernel and d not in kernels:
                continue
            names, using = self.names(d)
            for name, qualifier in names:
                for c in self.resolve(d, name, qualifier, using, unit):
                    if c is not d:
                        edges[d].add(c)
                        todo.append(c)
        leads = set(kernels)
        while True:
            more = {d for d, out in edges.items() if d not in leads and out & leads}
            if not more:
                break
            leads |= more
        others = {d for d in edges if d.kernel and d not in kernels}
        left_out = others | {d for d, out in edges.items() if out & others and d not in leads}
        used, todo = set(), list(roots)
        while todo:
            d = todo.pop()
            if d not in used and d not in left_out:
                used.add(d)
                todo += edges[d]
        return used


_indexes = {}


def index():
    if ROOT not in _indexes:
        _indexes[ROOT] = Index()
    return _indexes[ROOT]


def main_definitions(lesson):
    out = []
    for path, names in MAIN[lesson]:
        if not os.path.isfile(os.path.join(ROOT, path)):
            sys.exit(f"reading.py: MAIN[{lesson!r}] names {path}, which does not exist: update MAIN")
        for name in names:
            found = [d for d in source(path).defs if d.name == name and not d.emu and not d.decl]
            if not found:
                sys.exit(f"reading.py: MAIN[{lesson!r}] names {name}, which {path} does not define: update MAIN")
            out += found
    return out


class Coverage:
    """The lines of what a lesson's kernels use (`used`: file → set of lines), those of them its
    reading path lists (`covered`), and the definitions not wholly listed (`missing`)."""

    def __init__(self, lesson):
        self.lesson = lesson
        self.defs = index().closure(main_definitions(lesson))
        self.used = {}
        for d in self.defs:
            self.used.setdefault(d.path, set()).update(range(d.first, d.last + 1))
        listed = {}
        for path, names, _ in READING.get(lesson, []):
            for a, b in ranges(path, names):
                listed.setdefault(path, set()).update(range(a, b + 1))
        self.covered = {p: lines & listed.get(p, set()) for p, lines in self.used.items()}
        self.missing = []
        for d in sorted(self.defs, key=lambda d: (d.path, d.first)):
            left = set(range(d.first, d.last + 1)) - listed.get(d.path, set())
            if left:
                self.missing.append((d, len(left)))
        self.missing.sort(key=lambda m: -m[1])

    def counts(self):
        return sum(map(len, self.covered.values())), sum(map(len, self.used.values()))

    def fraction(self):
        covered, used = self.counts()
        return covered / used if used else 1.0

    def floor(self):
        return FLOOR.get(self.lesson, THRESHOLD)

    def percent(self):
        """The share in whole percent, rounded down: a path at 89.6% is not shown as 90%."""
        covered, used = self.counts()
        return f"{covered * 100 // used if used else 100}%"

    def line(self):
        covered, used = self.counts()
        text = f"{self.lesson}: coverage {self.percent()} ({covered}/{used} lines in {len(self.used)} files)"
        if self.missing:
            text += ", missing: " + ", ".join(f"{d.name} ({d.where()})" for d, _ in self.missing)
        return text


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


DIFF_FILE = "DIFF.md"  # beside the lesson: steps/NN_*/DIFF.md


def lessons_on_disk():
    """The lessons of the tree: steps/NN_*/README.md."""
    steps = os.path.join(ROOT, "steps")
    return sorted(d for d in os.listdir(steps) if re.match(r"\d\d_", d) and
                  os.path.isfile(os.path.join(steps, d, "README.md")))


def heading_anchor(heading):
    """The anchor GitHub gives a heading, from its text as rendered (as docs/benchmarks/prose_check.py's slug)."""
    heading = re.sub(r"\[([^][]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


def step_diffs(lesson):
    """[(title, changed lines, the unified diff's lines)] of a lesson's DIFFS."""
    out = []
    for title, before, after in DIFFS[lesson]:
        a = [line for path, name in before for line in symbol_text(path, name) + [""]][:-1]
        b = [line for path, name in after for line in symbol_text(path, name) + [""]][:-1]
        name_a = " + ".join(f"{p}:{s}" for p, s in before)
        name_b = " + ".join(f"{p}:{s}" for p, s in after)
        diff = list(difflib.unified_diff(a, b, name_a, name_b, n=3, lineterm=""))
        changed = sum(1 for d in diff if d[:1] in "+-" and d[:3] not in ("+++", "---"))
        out.append((title, changed, diff))
    return out


def diff_file(lesson):
    """steps/<lesson>/DIFF.md, all of it: each diff of DIFFS under a heading of its own."""
    step = lesson.split("_")[0]
    out = [f"# Step {step}'s code against the steps before it", "",
           "Generated by `docs/reading.py` from the code as it is (do not edit: `python3 docs/reading.py` "
           "rewrites it, and CI's `--check` fails when it is out of date). The lesson it belongs to: "
           "[README.md](README.md).", ""]
    for title, changed, diff in step_diffs(lesson):
        out += [f"## {title}", "", f"{changed} lines changed.", "", "```diff"] + diff + ["```", ""]
    return "\n".join(out)


def diff_block(lesson):
    """The lesson's <!-- diff --> block: one line per diff, linked to its heading in DIFF.md."""
    return "".join(f"- [{title}]({DIFF_FILE}#{heading_anchor(title)}): {changed} lines changed "
                   f"(generated by `docs/reading.py`)\n" for title, changed, _ in step_diffs(lesson))


def filled(marker, text, path, lesson, make):
    """`text` with the body of its `marker` block for `lesson` made anew."""
    if not marker.search(text):
        sys.exit(f"reading.py: {path}: no {marker.pattern.split('(?P')[0].lstrip('(')}{lesson} --> block")

    def sub(m):
        if m.group("id") != lesson:
            sys.exit(f"reading.py: {path}: a block names {m.group('id')}, not {lesson}")
        return m.group(1) + make() + m.group(4)
    return marker.sub(sub, text)


# ---------------------------------------------------------------------------------------------
# A lesson's shape: what a learner reads in one sitting, in the lessons' outline
# ---------------------------------------------------------------------------------------------
#
# A lesson (steps/NN_*/README.md) holds at most MAX_WORDS words of its own prose and MAX_LINES
# lines as a file, and has every section of OUTLINE. Its own prose is what a reader reads as text:
# not the generated blocks (<!-- reading -->, <!-- diff -->, <!-- results -->, <!-- figure -->,
# <!-- ncu -->, <!-- quality -->, whatever the kind), tables, code (fenced or indented), HTML
# comments (the numbers blocks), images, or the targets of links; a number held by a
# <!-- n:... --> marker is prose. A word is a run of non-blanks with a letter or a digit in it.
# What was tried, measured and not kept goes to the step's lab notebook (docs/lab/), linked in one
# line; the notebook is not held to this.

MAX_WORDS = 4500
MAX_LINES = 800

# The outline: (section, what a heading or a paragraph's bold lead-in says (a regular expression,
# case-insensitive), what the section must hold (a regular expression over its text, None: anything),
# and what that is). Every lesson has every section, but the ladder only in LADDERS.
OUTLINE = [
    ("what it assumes", r"\bassum", None, None),
    ("the idea", r"\bidea\b", None, None),
    ("the math", r"\bmath", None, None),
    ("paper → code", r"\bpaper\s*(→|->|to)\s*code", None, None),
    ("the IO model (HBM traffic, predicted and measured)", r"\bhbm traffic|\bio model|\bi/o\b",
     r"<!-- (ncu:|n:)", "bytes measured (an <!-- ncu --> block, or numbers held to data by <!-- n --> markers)"),
    ("the reading path (Read the code)", r"\bread the code|\breading path", r"<!-- reading:",
     "the generated <!-- reading --> block"),
    ("the ladder (what each rung bought)", r"\bladder|\bwhat each \w+ bought", None, None),
    ("how to run it", r"\brun it\b|\bhow to run", None, None),
    ("results on a named GPU (generated)", r"\bresults\b", r"<!-- (results|figure|decode):",
     "a generated <!-- results -->, <!-- figure --> or <!-- decode --> block"),
    ("pitfalls", r"\bpitfall", None, None),
    ("what comes next", r"\bnext\b|\bwhat step \d+ (adds|fixes)", None, None),
    ("check yourself", r"\bcheck yourself", None, None),
]
# The steps whose variants are the rungs of a ladder (their programs' --variant), each measured.
LADDERS = {"08_tensor_cores", "09_hopper"}
# "Check yourself": at least this many questions, each a list item that opens with the question in
# bold (ending in "?") and goes on with its answer, which links to the section of the lesson it
# is answered from (`[...](#heading)`).
MIN_QUESTIONS = 3

# Lessons not held to the shape for now, and why. An entry goes when its lesson is rewritten; an
# exempt lesson that passes fails the check until its entry is removed.
EXEMPT = {}

# A generated block or a number's marker (<!-- kind:args -->...<!-- /kind -->), or another HTML comment.
MARKUP = re.compile(r"(?P<open><!-- (?P<kind>\w+):[^>]*-->)(?P<inner>.*?)<!-- /(?P=kind) -->|<!--.*?-->", re.S)
LIST_ITEM = re.compile(r"^(?:\d+\.|[-*+])\s+")


def text_lines(text, markers=False):
    """(line number, line) of a lesson's text outside code and HTML comments, the generated blocks
    emptied (their opening markers kept with `markers`: what a section holds) and the numbers'
    markers replaced by their numbers (kept as they are with `markers`). Tables stay."""
    def mask(m):
        blank = re.sub(r"[^\n]", "", m.group(0))
        if m.group("open") is None:
            return blank
        if m.group("kind") == "n":
            return m.group(0) if markers else m.group("inner")
        return m.group("open") + blank if markers else blank
    out, fence, code, blank = [], False, False, True
    for n, line in enumerate(MARKUP.sub(mask, text).split("\n"), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
            continue
        if fence:
            continue
        if line.startswith(("    ", "\t")) and (blank or code):  # an indented code block
            code = True
            continue
        if line.strip():
            code = False
        blank = not line.strip()
        out.append((n, line))
    return out


def own_prose(text):
    """The lesson's own prose (see above), as text."""
    lines = [line for _, line in text_lines(text) if not line.lstrip().startswith("|")]
    prose = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", "\n".join(lines))
    return re.sub(r"\[([^][]*)\]\([^)\s]*\)", r"\1", prose)


def word_count(text):
    return sum(1 for w in own_prose(text).split() if re.search(r"\w", w))


def lesson_sections(text):
    """[(title, anchor, body)]: every heading with the text under it up to the next heading of its
    level or above, and every paragraph's bold lead-in (`**The idea in three lines.** ...`) with
    the text up to the next heading; bodies keep the markers of generated blocks and numbers."""
    lines = text_lines(text, markers=True)
    heads = []
    for i, (n, line) in enumerate(lines):
        m = re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            heads.append((i, len(m.group(1)), m.group(2)))
    out = []
    for k, (i, level, title) in enumerate(heads):
        end = next((j for j, lv, _ in heads[k + 1:] if lv <= level), len(lines))
        out.append((title, heading_anchor(title), "\n".join(line for _, line in lines[i + 1:end])))
    for i, (n, line) in enumerate(lines):
        m = re.match(r"\*\*(.+?)\*\*", line)
        if m and (i == 0 or not lines[i - 1][1].strip()):
            end = next((j for j, _, _ in heads if j > i), len(lines))
            out.append((m.group(1), None, "\n".join(line for _, line in lines[i:end])))
    return out


def check_yourself_problems(body, anchors):
    """What is wrong with a "Check yourself" section's questions (see MIN_QUESTIONS)."""
    items, out = [], []
    for line in body.split("\n"):
        if LIST_ITEM.match(line):
            items.append(LIST_ITEM.sub("", line))
        elif items and line.strip():
            items[-1] += " " + line.strip()
    questions = 0
    for n, item in enumerate(items, 1):
        m = re.match(r"\*\*(.+?\?)\*\*(.*)", item)
        if not m:
            continue
        questions += 1
        answer = m.group(2)
        if sum(1 for w in re.sub(r"\[([^][]*)\]\([^)]*\)", r"\1", answer).split() if re.search(r"\w", w)) < 3:
            out.append(f"check yourself: question {n} ({m.group(1)[:60]!r}) has no answer")
        elif not any(a in anchors for a in re.findall(r"\]\(#([^)\s]+)\)", answer)):
            out.append(f"check yourself: the answer to question {n} ({m.group(1)[:60]!r}) links to no section of "
                       "the lesson it is answered from ([...](#heading))")
    if questions < MIN_QUESTIONS:
        out.append(f"check yourself: {questions} questions, at least {MIN_QUESTIONS} (a list item each: "
                   "**the question?** and its answer)")
    return out


def lesson_shape(lesson, text):
    """(own words, lines, problems) of a lesson's text."""
    words, lines = word_count(text), len(text.rstrip("\n").split("\n"))
    problems = []
    if words > MAX_WORDS:
        problems.append(f"{words:,} words of own prose, over {MAX_WORDS:,}")
    if lines > MAX_LINES:
        problems.append(f"{lines:,} lines, over {MAX_LINES:,}")
    sections = lesson_sections(text)
    anchors = {a for _, a, _ in sections if a}
    missing = []
    for name, says, holds, what in OUTLINE:
        if name.startswith("the ladder") and lesson not in LADDERS:
            continue
        found = [body for title, _, body in sections if re.search(says, title, re.I)]
        if not found:
            missing.append(name)
        elif holds and not any(re.search(holds, body) for body in found):
            problems.append(f"{name}: the section holds no {what}")
        if name == "check yourself" and found:
            problems += check_yourself_problems(found[0], anchors)
    if missing:
        problems.append("no section for " + "; ".join(missing))
    return words, lines, problems


def shape_report(lessons):
    """(lines to print, whether the check fails): each lesson's problems, those of exempt lessons
    only when they have none (their entry must go)."""
    out, failed = [], False
    for lesson in lessons:
        with open(os.path.join(ROOT, "steps", lesson, "README.md"), encoding="utf-8") as f:
            words, lines, problems = lesson_shape(lesson, f.read())
        where = f"steps/{lesson}/README.md"
        if lesson in EXEMPT and not problems:
            out.append(f"{where}: passes the lesson check: remove its entry from EXEMPT in docs/reading.py")
            failed = True
        elif lesson not in EXEMPT:
            out += [f"{where}: {p}" for p in problems]
            failed |= bool(problems)
    return out, failed


def write_or_compare(path, new, check, stale):
    """Writes `new` to `path` unless it holds it already (with `check`, only notes it in `stale`)."""
    old = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
    if new != old:
        stale.append(os.path.relpath(path, ROOT))
        if not check:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if a generated block or step diff is out of date, a reading path covers too "
                         "little, or a lesson is too long or lacks a section of the outline")
    ap.add_argument("--coverage", action="store_true",
                    help="print each lesson's coverage and what its reading path leaves out; change nothing")
    ap.add_argument("--lessons", action="store_true",
                    help="print each lesson's words of own prose, lines and what the outline misses; change nothing")
    args = ap.parse_args(argv)
    if args.coverage:
        for lesson in sorted(MAIN):
            print(Coverage(lesson).line())
        return 0
    if args.lessons:
        for lesson in lessons_on_disk():
            with open(os.path.join(ROOT, "steps", lesson, "README.md"), encoding="utf-8") as f:
                words, lines, problems = lesson_shape(lesson, f.read())
            note = f" (exempt: {EXEMPT[lesson]})" if lesson in EXEMPT else ""
            print(f"{lesson}: {words:,} words of own prose, {lines:,} lines{note}" +
                  "".join(f"\n  {p}" for p in problems))
        return 0
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
            write_or_compare(os.path.join(ROOT, "steps", lesson, DIFF_FILE), diff_file(lesson), args.check, stale)
        write_or_compare(path, new, args.check, stale)
    orphans = [f"steps/{d}/{DIFF_FILE}" for d in lessons_on_disk()
               if d not in DIFFS and os.path.exists(os.path.join(ROOT, "steps", d, DIFF_FILE))]
    if not args.check:
        for p in orphans:
            os.remove(os.path.join(ROOT, p))
            stale.append(p + " (removed: no diff of DIFFS)")
        orphans = []
    short = [c for c in map(Coverage, sorted(MAIN)) if c.fraction() < c.floor()] if args.check else []
    shape, misshapen = shape_report(lessons_on_disk()) if args.check else ([], False)
    if args.check and (stale or orphans or short or misshapen):
        if stale:
            print("out of date (run python3 docs/reading.py):", ", ".join(stale))
        if orphans:
            print("not written by docs/reading.py (no diff of DIFFS; run python3 docs/reading.py):", ", ".join(orphans))
        for c in short:
            covered, used = c.counts()
            print(f"{c.lesson}: the reading path covers {c.percent()} ({covered}/{used} lines) of what its "
                  f"kernels use, below {c.floor():.0%} (python3 docs/reading.py --coverage lists what it leaves out)")
        for line in shape:
            print(line)
        return 1
    verb = "checked" if args.check else "wrote"
    print(f"{verb} the reading path of {len(lessons)} lessons" + (f"; updated {', '.join(stale)}" if stale else ""))
    if args.check:
        exempt = [d for d in lessons_on_disk() if d in EXEMPT]
        print(f"checked the size and outline of {len(lessons_on_disk())} lessons" +
              (f" ({', '.join(exempt)} exempt for now: python3 docs/reading.py --lessons)" if exempt else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
