//===- HopperOps.td - the hopper dialect and its ops ---------*- tablegen -*-===//
//
// The Hopper level: the concepts of the warp-specialised sm_90a kernel as ops
// with verifiers, between the tiled attn IR and NVVM. convert-attn-to-hopper
// emits them; convert-hopper-to-nvvm lowers each with one pattern. This is
// the first part of that level (issue: "The Hopper kernel built by passes
// and ops, not by text"); docs/design.md lists what is here and what is not
// yet.
//
//===----------------------------------------------------------------------===//

#ifndef FA3_HOPPER_OPS
#define FA3_HOPPER_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Hopper_Dialect : Dialect {
  let name = "hopper";
  let cppNamespace = "::fa3::hopper";
  let summary = "The warp-specialised Hopper (sm_90a) attention kernel's concepts";
  let description = [{
    Ops for the pieces of an FA3-style kernel that NVVM only spells as
    numbers, inline PTX or convention: the split of the CTA into a producer
    warpgroup and consumer warpgroups with their register budgets, the
    CTA's named barriers (one enum, the ids assigned in one place) and the
    warpgroup-wide vote on them; register fragments (`!hopper.frag`: a
    warpgroup's tile in the wgmma accumulator layout, one SSA value until
    the final conversion) and the math on them: warpgroup MMA, the online
    softmax step, the row rescale, and the tile's epilogue (1 / l and the
    log-sum-exp, the O and LSE stores); the shared-memory pipeline ring
    between producer and consumers (a type with its static facts, the
    mbarrier protocol as ops) and the TMA loads into it; the tile
    scheduler's arithmetic.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  // Ops take !llvm.ptr operands whose types their parsers build.
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect"];
}

class Hopper_Op<string mnemonic, list<Trait> traits = []>
    : Op<Hopper_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Named barriers
//===----------------------------------------------------------------------===//

def Hopper_BarrierTurn : I32EnumAttrCase<"turn", 0>;
def Hopper_BarrierEpilogue : I32EnumAttrCase<"epilogue", 1>;
def Hopper_BarrierVote : I32EnumAttrCase<"vote", 2>;
def Hopper_BarrierStage : I32EnumAttrCase<"stage", 3>;
def Hopper_BarrierTranspose : I32EnumAttrCase<"transpose", 4>;
def Hopper_BarrierReduceFree : I32EnumAttrCase<"reduce_free", 5>;
def Hopper_BarrierReduceFull : I32EnumAttrCase<"reduce_full", 6>;
def Hopper_BarrierCopy : I32EnumAttrCase<"copy", 7>;
def Hopper_BarrierKind : I32EnumAttr<"BarrierKind",
    "what a consumer warpgroup's named barrier is for",
    [Hopper_BarrierTurn, Hopper_BarrierEpilogue, Hopper_BarrierVote,
     Hopper_BarrierStage, Hopper_BarrierTranspose, Hopper_BarrierReduceFree,
     Hopper_BarrierReduceFull, Hopper_BarrierCopy]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::fa3::hopper";
}
def Hopper_BarrierKindAttr
    : EnumAttr<Hopper_Dialect, Hopper_BarrierKind, "barrier"> {
  // In the ops, the bare kind: `hopper.named_barrier.sync turn[%c] ...`
  let assemblyFormat = "$value";
}

class Hopper_NamedBarrierOp<string mnemonic, string what>
    : Hopper_Op<mnemonic> {
  let summary = "named barrier of a consumer warpgroup: " # what;
  let description = [{
    Each consumer warpgroup c (of `consumers`) owns one hardware named
    barrier per kind; the ids are assigned here, not by the kernel builder's
    arithmetic (id 0 is the CTA barrier of `gpu.barrier`):

      turn      1 + c                  ping-pong turns (two consumers):
                                       c syncs on its own before its GEMMs
                                       and arrives on the other's after
      epilogue  1 + 2 + c              the warpgroup's O staging
      vote      1 + 2 + consumers + c  warpgroup_any's reduction
      stage     1 + 2 + 2 consumers + c  a tile the warpgroup staged in
                                       shared memory (hopper.store_shared)
                                       before its wgmma reads it
      transpose 1 + 2 + 3 consumers    FP8: the producer warpgroup's V
                                       transposers, once a stage is
                                       written (consumer index 0)
      reduce_free 4 + 3 consumers + c  the backward: the producer's dQ
                                       writer has read the warpgroup's
                                       staged dQ (hopper.reduce_add_bulk)
      reduce_full 4 + 4 consumers + c  the warpgroup has staged its dQ
                                       (hopper.stage_fragment)
      copy      15                     the producer warps that copy a
                                       paged tile together
                                       (hopper.copy_paged_tile with
                                       warps > 1) before one arrives on
                                       the slot (consumer index 0; the
                                       last id, past every other kind's)

    Ids past 15 (the hardware has 16) are refused: the reduce barriers
    exist for up to two consumer warpgroups.

    `threads` take part in the barrier (a multiple of 32, up to 1024):
    256 for a turn (128 syncing, 128 arriving), 128 for a warpgroup's own,
    160 for a reduce barrier (the warpgroup and the writer warp).

    `diverged`: the threads that take part may reach it at different
    instructions, or the lanes of a warp apart (FP8's four transposer
    warps: warp 0 meets the others from its own program, and its lane 0
    also runs the producer thread's steps; hopper-producer-warp-transpose
    sets it). It lowers to `barrier.sync` / `barrier.arrive` without
    `.aligned`, which counts each thread as it arrives (PTX ISA,
    "barrier"); the `.aligned` form requires every thread that takes part
    to execute the same instruction.
  }] # what;
  let arguments = (ins I32:$consumer, Hopper_BarrierKindAttr:$kind,
                       ConfinedAttr<I64Attr, [IntMinValue<1>, IntMaxValue<3>]>:$consumers,
                       ConfinedAttr<I64Attr, [IntMinValue<32>, IntMaxValue<1024>]>:$threads,
                       UnitAttr:$diverged);
  let assemblyFormat = [{
    $kind `[` $consumer `]` `of` $consumers `threads` $threads attr-dict
  }];
  let hasVerifier = 1;
}

def Hopper_NamedBarrierSyncOp
    : Hopper_NamedBarrierOp<"named_barrier.sync",
        "\n\n    Waits until `threads` threads have arrived (bar.sync).">;
def Hopper_NamedBarrierArriveOp
    : Hopper_NamedBarrierOp<"named_barrier.arrive",
        "\n\n    Arrives without waiting (bar.arrive).">;

def Hopper_WarpgroupAnyOp : Hopper_Op<"warpgroup_any"> {
  let summary = "OR of a predicate over the 128 threads of a warpgroup";
  let description = [{
    True in every thread of consumer warpgroup `consumer` iff `pred` is true
    in any of its 128 threads: bar.red.or on the warpgroup's `vote` named
    barrier, then vote.any, so that ptxas knows the result to be
    warp-uniform (a branch on the barrier's result alone counts as
    divergent, and wgmma descriptor math after it would leave the uniform
    datapath). For branches around .aligned wgmma waits, which every warp
    of the warpgroup must take alike.
  }];
  let arguments = (ins I1:$pred, I32:$consumer,
                       ConfinedAttr<I64Attr, [IntMinValue<1>, IntMaxValue<3>]>:$consumers);
  let results = (outs I1:$any);
  let assemblyFormat = [{
    $pred `in` `consumer` `[` $consumer `]` `of` $consumers attr-dict
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Warp specialization
//===----------------------------------------------------------------------===//

// The regions end in gpu.yield, not an op of ours: libMLIR's verifier asks
// the terminator for its IsTerminator trait, and a trait's TypeID is keyed
// by the compiler's spelling of the type name, so an op compiled by GCC
// would not answer a libMLIR built by clang (docs/design.md, Reliability).
def Hopper_WarpSpecializeOp : Hopper_Op<"warp_specialize", [
    SingleBlockImplicitTerminator<"::mlir::gpu::YieldOp">,
    RecursiveMemoryEffects]> {
  let summary = "producer and consumer warpgroups with their register budgets";
  let description = [{
    Splits the CTA (128 x (1 + consumers) threads) by warpgroup: warpgroup 0
    runs the `producer` region, warpgroups 1 .. consumers run the
    `consumers` region with their consumer index (0 .. consumers - 1) as
    the block argument. Each role first moves its registers with setmaxnreg:
    the producer gives them up (`producer_regs` a thread), the consumers
    take them (`consumer_regs`), so that the CTA's registers at launch hold
    128 x (producer_regs + consumers x consumer_regs): the SM's 64K over
    its threads, or, in a function built for n CTAs a SM (`nvvm.minctasm`
    n), over n times as many (launchRegistersPerThread). Values defined
    before the op are visible in both regions; the regions yield nothing
    (their implicit terminator is `gpu.yield`).

    ```mlir
    hopper.warp_specialize producer regs 24 {
      ...   // TMA loads into the K/V ring
    } consumers(%c of 2) regs 240 {
      ...   // wgmma, softmax, epilogue of consumer %c
    }
    ```
  }];
  let arguments = (ins
      ConfinedAttr<I64Attr, [IntMinValue<24>, IntMaxValue<256>]>:$producer_regs,
      ConfinedAttr<I64Attr, [IntMinValue<24>, IntMaxValue<256>]>:$consumer_regs,
      ConfinedAttr<I64Attr, [IntMinValue<1>, IntMaxValue<3>]>:$consumers);
  let regions = (region SizedRegion<1>:$producer, SizedRegion<1>:$consumer);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

// The roles inside the producer warpgroup: its thread 0 drives the rings
// (TMA loads, the tile scheduler), and some of its warps may run helper
// roles (FP8's V transposer; the backward's dQ writer and row loader).
// Written as ops, so that a builder names the role and the lowering, not
// the builder, does the thread arithmetic.
def Hopper_ProducerThreadOp : Hopper_Op<"producer_thread", [
    SingleBlockImplicitTerminator<"::mlir::gpu::YieldOp">,
    RecursiveMemoryEffects, NoRegionArguments]> {
  let summary = "the producer warpgroup's thread 0";
  let description = [{
    Runs its region on thread 0 of the producer warpgroup (the one thread
    that issues TMA loads and commits ring slots). Only inside the
    `producer` region of `hopper.warp_specialize`.

    ```mlir
    hopper.producer_thread {
      hopper.ring.producer_acquire %k[%u] : ...
    }
    ```

    Inside `hopper.producer_warps ... first 0 count 1` (thread 0's warp
    running a program of its own, whose one-thread steps this op marks;
    its control flow is the warp's, alike in every lane) it may yield i32
    results: thread 0's values, given to every lane of the
    warp (a shuffle from lane 0), e.g. the tile a claim took.

    ```mlir
    %tile = hopper.producer_thread -> (i32) {
      %t = hopper.tile_claim ...
      gpu.yield %t : i32
    }
    ```
  }];
  let results = (outs Variadic<I32>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "(`->` `(` type($results)^ `)`)? $body attr-dict";
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, ::mlir::TypeRange{}); }]>];
  let hasVerifier = 1;
}

def Hopper_ProducerWarpsOp : Hopper_Op<"producer_warps", [
    SingleBlockImplicitTerminator<"::mlir::gpu::YieldOp">,
    RecursiveMemoryEffects]> {
  let summary = "warps of the producer warpgroup running a helper role";
  let description = [{
    Runs its region on warps `first` .. `first + count - 1` of the producer
    warpgroup (of its four; warp 0's thread 0 is the `producer_thread`'s),
    the block argument being the warp's index among them (0 .. count - 1).
    Only inside the `producer` region of `hopper.warp_specialize`; the
    warps share the producer's register budget.

    ```mlir
    hopper.producer_warps(%w) first 1 count 3 {
      ...   // FP8: transpose V's slots, warp %w of 3
    }
    ```
  }];
  let arguments = (ins
      ConfinedAttr<I64Attr, [IntMinValue<0>, IntMaxValue<3>]>:$first,
      ConfinedAttr<I64Attr, [IntMinValue<1>, IntMaxValue<4>]>:$count);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

// A value every lane of a warp holds alike, said so: ptxas cannot tell
// for a value loaded from memory, and the arithmetic derived from it would
// leave the uniform datapath.
def Hopper_WarpUniformOp : Hopper_Op<"warp_uniform"> {
  let summary = "a value the same in every lane of the warp";
  let description = [{
    `value`, which the program computes alike in every lane of the warp
    (e.g. loaded from one address), made visibly warp-uniform: lane 0's
    value by shfl.sync in a role of whole warps (the consumers, so that
    ptxas keeps what derives from it in uniform registers: an R2UR before
    every wgmma otherwise). In the producer thread, where one lane runs
    and a full-warp shuffle would be wrong, `hopper-warp-specialize`
    replaces it by `value` itself.

    ```mlir
    %n = hopper.warp_uniform %loaded : i32
    ```
  }];
  let arguments = (ins I32:$value);
  let results = (outs I32:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
  let hasVerifier = 1;
}

// Pointers of the LLVM dialect by address space (the kernel's parameters
// and its shared memory). Written here rather than taken from
// LLVMOpBase.td: including that file would put the LLVM dialect's enums
// into this dialect's generated enum declarations. Buildable, so that the
// ops' syntax need not spell them.
class Hopper_LLVMPointer<int addressSpace, string what>
    : Type<CPred<"::llvm::isa<::mlir::LLVM::LLVMPointerType>($_self) && "
                 "::llvm::cast<::mlir::LLVM::LLVMPointerType>($_self)"
                 ".getAddressSpace() == " # addressSpace>,
           what # " (!llvm.ptr<" # addressSpace # ">)",
           "::mlir::LLVM::LLVMPointerType">,
      BuildableType<"::mlir::LLVM::LLVMPointerType::get($_builder.getContext(), "
                    # addressSpace # ")">;
def Hopper_GlobalPtr : Hopper_LLVMPointer<1, "a global-memory pointer">;
def Hopper_SharedPtr : Hopper_LLVMPointer<3, "a shared-memory pointer">;
def Hopper_GenericPtr : Hopper_LLVMPointer<0, "a generic pointer">;

include "fa3/Dialect/Hopper/IR/HopperFragmentOps.td"
include "fa3/Dialect/Hopper/IR/HopperRingOps.td"
include "fa3/Dialect/Hopper/IR/HopperSchedulerOps.td"
include "fa3/Dialect/Hopper/IR/HopperEpilogueOps.td"

#endif // FA3_HOPPER_OPS
