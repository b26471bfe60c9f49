//===- Passes.td - conversions out of the attn dialect --------*- tablegen -*-===//

#ifndef FA3_CONVERSION_PASSES
#define FA3_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def AttnHopperConfig : Pass<"attn-hopper-config"> {
  let summary = "Choose each attention's Hopper kernel configuration";
  let description = [{
    Chooses, for each `attn.flash_attention` and
    `attn.flash_attention_varlen` (memref form), the whole
    configuration of its sm_90a kernel in one table: tile sizes, K/V ring
    depth, persistence, Q buffers, lazy rescaling, K/V multicast, ping-pong
    and the O store. Each default is what measured fastest on the H200
    (bench/NOTES.md, Defaults); the options override them. Where a choice
    does not fit an attention, the table falls back (one Q buffer where two
    leave no room for O's, no K/V multicast with a mask or at head dim 64);
    a configuration the kernel cannot take at all (head dim, block sizes,
    shared memory) is refused with the reason, as are operands the kernel
    does not take (element types, strides). A packed variable-length
    batch's kernel takes no clusters, and stores O by TMA (inside each
    sequence; its last partial rows directly) only with one CTA per tile
    and two consumer warpgroups. The result is recorded on the op as
    `attn.hopper_config = #attn.hopper_config<...>`, which `attn-tile`
    (tile sizes) and `convert-attn-to-hopper` (the kernel and its launch
    facts) read.
  }];
  let options = [
    Option<"blockM", "block-m", "int64_t", /*default=*/"0",
           "Rows of Q per tile: 128 (two consumer warpgroups) or 192 (three, "
           "no ping-pong), with decode also 64 (one); 0: per head dim (192 "
           "for 64 with a full mask and for FP8 at 64, and with "
           "min-seqlen-q from 6144 for 64 causal; else 128; 64 with "
           "decode)">,
    Option<"blockN", "block-n", "int64_t", /*default=*/"0",
           "Rows of K/V per tile (0: per head dim: 128 up to head dim 128 "
           "(FP8 128 with min-seqlen-q from 8192: 192), "
           "112 at 192 (96 with a mask), 64 at 256; with decode and 64 rows, "
           "64 up to head dim 128, two CTAs a SM where three stages fit; "
           "with decode in FP8 128 keys, two stages, two CTAs a SM)">,
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "Depth of the K/V shared-memory ring (0: per head dim, as measured "
           "on the H200: 4 for head dim 64 with 128-row tiles, else 2; FP8: "
           "3 at head dim 64, where two Q buffers fit beside them, else 2)">,
    Option<"pingpong", "pingpong", "bool", /*default=*/"true",
           "Alternate the consumer warpgroups' GEMMs with named barriers">,
    Option<"persistent", "persistent", "::fa3::Toggle", /*default=*/"::fa3::Toggle::Auto",
           "CTAs loop over tiles, the producer loading the next tile's Q and "
           "K/V while the consumers finish the current one: on, off, or auto "
           "(on where it measured faster on the H200: head dim 64 and 128, and "
           "every FP8 kernel)",
           [{::llvm::cl::values(
               clEnumValN(::fa3::Toggle::Auto, "auto", "where measured faster"),
               clEnumValN(::fa3::Toggle::On, "on", "always (where it applies)"),
               clEnumValN(::fa3::Toggle::Off, "off", "never"))}]>,
    Option<"tmaStore", "tma-store", "bool", /*default=*/"true",
           "Stage O through shared memory (stmatrix) and write it with a TMA "
           "store (a persistent varlen kernel: 16-byte stores by its "
           "threads); false: 4-byte stores from the accumulator fragment. The "
           "backward: dQ staged in shared memory and added by the producer's "
           "bulk reductions (the table's choice at every head dim); false: "
           "the consumers' vector atomics (two Q / dO stages at head dim "
           "256, 64-query steps at 64)">,
    Option<"qBuffers", "q-buffers", "int64_t", /*default=*/"0",
           "Q tiles in shared memory: 2 lets a persistent CTA load the next "
           "tile's Q during the current one; 0: 2 where it fits beside the O "
           "staging buffer (persistent, head dim 64 and 128; FP8: 128; not "
           "the packed 192-row causal kernel of min-seqlen-q, where two "
           "spill), else 1">,
    Option<"lazyRescale", "lazy-rescale", "::fa3::Toggle", /*default=*/"::fa3::Toggle::Auto",
           "O *= alpha only in warpgroups where a row raised its running "
           "max, behind a branch that also keeps ptxas from hoisting the P V "
           "wait above the softmax: on, off (rescale after every kv block), "
           "or auto (on where it measured faster on the H200: head dim 128 "
           "and 256)",
           [{::llvm::cl::values(
               clEnumValN(::fa3::Toggle::Auto, "auto", "where measured faster"),
               clEnumValN(::fa3::Toggle::On, "on", "always (where it applies)"),
               clEnumValN(::fa3::Toggle::Off, "off", "never"))}]>,
    Option<"kvMulticast", "kv-multicast", "::fa3::Toggle", /*default=*/"::fa3::Toggle::Auto",
           "2-CTA clusters: the CTAs of a cluster take neighbouring m-blocks "
           "of one head and share every K/V tile by TMA multicast, each "
           "loading half: on (wherever it applies: full mask, head dim 128 "
           "or 256), off, or auto (on where it measured faster on the "
           "H200: persistent kernels, i.e. head dim 128)",
           [{::llvm::cl::values(
               clEnumValN(::fa3::Toggle::Auto, "auto", "where measured faster"),
               clEnumValN(::fa3::Toggle::On, "on", "always (where it applies)"),
               clEnumValN(::fa3::Toggle::Off, "off", "never"))}]>,
    Option<"rescaleThreshold", "rescale-threshold", "double",
           /*default=*/"8.0",
           "With lazy rescaling, a row's running max is raised only when a "
           "kv block's scores exceed it by more than this (log2 units, 0 to "
           "15), so P stays below 2^threshold; 0 keeps the exact max">,
    Option<"decode", "decode", "bool", /*default=*/"false",
           "The decoding kernel (flash-decoding): split-KV (the kv blocks "
           "of a tile split over a launch-time number of CTAs, merged by a "
           "generated <kernel>_combine) and GQA packing (the q heads of a "
           "kv head share one tile, so K and V are read once), one CTA per "
           "tile, 64-row tiles, O stored directly. Fixed-length "
           "forward only">,
    Option<"pagedKv", "paged-kv", "bool", /*default=*/"false",
           "A packed variable-length batch's kernel that also reads k and v "
           "through a launch-time page table (a paged KV cache: the "
           "table's pages in order are the packed rows, each sequence's "
           "from cu_seqlens_k), one CTA per tile. Variable-length forward "
           "only (the decoding kernel takes a page table by itself)">,
    Option<"minSeqlenQ", "min-seqlen-q", "int64_t", /*default=*/"0",
           "Configure the forward for calls with at least this many query "
           "rows (0: any length). Where the table has an entry for long "
           "sequences (head dim 64 causal: 192 query rows from 6144; FP8 "
           "head dim 128 full or causal: 192-key tiles from 8192) and "
           "this reaches it, that entry applies, and min_seqlen_q in the "
           "launch facts tells a launcher to take the kernel from that "
           "length on (the C API's spec compile adds such a kernel by "
           "itself); elsewhere it changes nothing">,
    Option<"transposeWarps", "transpose-warps", "int64_t", /*default=*/"0",
           "FP8: the producer warpgroup's warps that transpose V: 3 (warps "
           "1 .. 3, warp 0 loading) or 4 (warp 0 too, one fill behind its "
           "loads, as FlashAttention-3; persistent kernels, and decoding "
           "kernels, whose four warps also copy small pages: "
           "hopper-producer-warp-transpose); 0: 4 at head dim 256 "
           "(persistent) and for decoding, else 3, as measured "
           "(bench/NOTES.md, Log, four transposer warps)">,
  ];
}

def ConvertAttnToHopper : Pass<"convert-attn-to-hopper", "::mlir::ModuleOp"> {
  let summary = "Generate the warp-specialised sm_90a kernel from tiled attention";
  let description = [{
    Takes the output of `attn-tile` (a grid of `attn.kv_range`,
    `attn.tile_update` and `attn.tile_finalize`) and generates, per attention
    computation, a `gpu.module` with an FA3-style kernel: a producer
    warpgroup loading Q once and K/V blocks by TMA (128-byte swizzle) into a
    multi-stage shared-memory ring with mbarrier full/empty pairs, and two
    consumer warpgroups computing S = Q K^T by wgmma (SS), the online softmax
    on the accumulator fragment and O += P V by wgmma with P in registers
    (RS), with setmaxnreg register reallocation between the roles. The
    epilogue stages O in shared memory (stmatrix into the 128B-swizzled TMA
    box layout) and one thread per warpgroup stores it by TMA.

    The tiled form of `attn.flash_attention_varlen` (per-sequence views of
    the packed arguments, placed by cu_seqlens_q/k and seqused_k at the
    sequence index) becomes a kernel over (m-block, q head, sequence) tiles
    whose roles read each sequence's bounds from those arrays with the same
    builder; other views are refused.

    The kv-block schedule is `attn.kv_range` expanded into a device function
    by the shared builder, and the per-element mask of boundary blocks is the
    shared visibility builder, so the kernel re-derives neither. The
    kernel's configuration (tiles, stages, persistence, ...) is the
    `attn.hopper_config` that `attn-hopper-config` chose and `attn-tile`
    carried to the `attn.kv_range`; this pass has no tuning options of its
    own.

    The consumers' kv loop comes out sequential (per block: S, the softmax
    step, O *= alpha, O += P V), marked `hopper.overlap`, and the
    producer's transfers as `hopper.load_tile`s; `hopper-async-copy`
    writes the TMA transfers, `hopper-overlap` software-pipelines the kv
    loop and `hopper-pingpong` orders the two consumers' wgmma windows (all
    run in `attn-hopper-pipeline`).

    The host function that held the computation is replaced by its kernels
    (one gpu.module per attention op): their launch facts (kernel name,
    threads, dynamic shared memory, tiles, grid kind, parameter order) are
    attached to each gpu.func as `attn.launch`, and the C runtime (runtime/)
    launches them. A function that does anything besides attention (and the
    index math and allocations around it) is rejected, since that work
    would be lost.
  }];
  let dependentDialects = ["::fa3::hopper::HopperDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def AttnKernelParamsByValue
    : Pass<"attn-kernel-params-by-value", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Pass the kernel's tensor maps by value (__grid_constant__)";
  let description = [{
    Runs on the generated kernels once they are in the LLVM/NVVM dialects.
    The parameters that the kernel ABI (runtime/include/fa3rt_abi.def)
    passes by value, the four CUtensorMaps, become `llvm.byval` byte arrays
    of their size and alignment with `nvvm.grid_constant`: the kernel reads
    them in parameter space through their generic address (cvta.param), as
    FlashAttention-3 passes its TMA descriptors. A launch then copies
    nothing from host memory, so it can be captured in a CUDA graph.

    A pass of its own because gpu-to-nvvm does not carry `llvm.byval` from
    gpu.func arguments and NVVM accepts `nvvm.grid_constant` only on the
    arguments of an llvm.func kernel. It applies to the kernels that carry
    launch facts (`attn.launch`), whose `params` must be the ABI's list.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect"];
}

def ConvertHopperToNVVM : Pass<"convert-hopper-to-nvvm"> {
  let summary = "Lower the hopper dialect to NVVM, one pattern per op";
  let description = [{
    Rewrites each hopper op into the NVVM/LLVM/arith/scf ops of its PTX:
    `hopper.warp_specialize` becomes an scf.if on the warpgroup index whose
    arms start with their setmaxnreg (the consumers' region gets warpgroup
    - 1 as its index); a named barrier's id is its kind's base (fa3::hopper::namedBarrierBase)
    plus the consumer index, then `nvvm.barrier` / `nvvm.barrier.arrive`;
    `hopper.warpgroup_any` becomes bar.red.or on the consumer's vote
    barrier followed by vote.any; a `!hopper.ring` becomes the
    `!llvm.ptr<3>` base it was created at, and each ring op (and
    `hopper.tma_load`) the mbarrier or TMA op on its slot's stage, phase and
    addresses (lib/Conversion/HopperToNVVM/RingToNVVM.cpp); fragments become
    the struct of a thread's registers, and the fragment and epilogue ops
    are unrolled on them (quad shuffles, stmatrix + TMA store, predicated
    global stores); the tile scheduler's ops become its arithmetic. Runs on
    the generated gpu.module before the upstream lowering to LLVM.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // FA3_CONVERSION_PASSES
