//===- HopperLimits.h - hardware limits the hopper level checks -*- C++ -*-===//
//
// Plain constants (no MLIR), shared by the dialect's verifiers, the
// kernel builder's layout and the lowering to NVVM.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_DIALECT_HOPPER_IR_HOPPERLIMITS_H
#define FA3_DIALECT_HOPPER_IR_HOPPERLIMITS_H

#include <cstdint>

namespace fa3::hopper {
/// The largest dynamic shared memory a Hopper CTA may use (227 KiB).
inline constexpr int64_t kMaxDynamicSmem = 232448;
/// Shared memory of an SM (228 KiB), of which each resident CTA also
/// holds 1 KiB for the system (CUDA C++ Programming Guide, compute
/// capability 9.0: shared memory).
inline constexpr int64_t kSmSharedMemory = 233472;
inline constexpr int64_t kCtaReservedSmem = 1024;
/// The dynamic shared memory a CTA may use where `ctasPerSm` CTAs are to
/// be resident on one SM together.
inline constexpr int64_t maxDynamicSmem(int64_t ctasPerSm) {
  return ctasPerSm <= 1 ? kMaxDynamicSmem
                        : kSmSharedMemory / ctasPerSm - kCtaReservedSmem;
}
/// Lanes of a warp.
inline constexpr int64_t kWarpLanes = 32;
/// Threads of a warpgroup (the unit of wgmma and of setmaxnreg).
inline constexpr int64_t kWarpgroupThreads = 128;
/// 32-bit registers of an SM.
inline constexpr int64_t kSmRegisters = 65536;
/// Registers a thread of a CTA of `threads` threads holds at launch: its
/// share of the SM's with `ctasPerSm` such CTAs resident (nvvm.minctasm),
/// a multiple of 8 (168 at 384 threads, 128 at 256 threads two a SM). setmaxnreg
/// moves registers between warpgroups within this allocation: an increase
/// waits until decreases have freed what it asks for, so budgets that add
/// up to more hang the CTA.
inline constexpr int64_t launchRegistersPerThread(int64_t threads,
                                                  int64_t ctasPerSm = 1) {
  return kSmRegisters / (threads * ctasPerSm) / 8 * 8;
}
/// Bytes of a row of a TMA box / wgmma operand under the 128B swizzle.
inline constexpr int64_t kSwizzleBytes = 128;
/// Keys that share a factor of hopper.scale_key_blocks (FP8's k block
/// scales: attn.flash_attention's kDescaleBlock).
inline constexpr int64_t kScaleKeyBlock = 128;
/// Columns (bytes) of one unit of hopper.transpose_stage: two 16-byte
/// chunks, the matrices of one ldmatrix.x4.
inline constexpr int64_t kTransposeUnitCols = 32;
/// A TMA box's extent in each dimension (cuTensorMapEncodeTiled: boxDim
/// at most 256 elements).
inline constexpr int64_t kMaxTmaBoxRows = 256;
/// The K and V bytes that a causal section of (head, batch) pairs may have
/// (hopper.tile_coords sections): about half the H100's 50 MB L2 (the
/// H200's read 60 MB through PyTorch), FlashAttention-3's budget for its
/// causal order, so that a section's K/V stay in L2 beside Q and O.
inline constexpr int64_t kL2SectionBytes = 32 << 20;
/// Keys below which a causal kernel's tiles keep each head's m-blocks in
/// turn (sections of one pair): with few kv blocks a tile the grid's tail
/// is short anyway, and sections at every length measured 0.86-1.02x at
/// 512 and 1k keys and 0.95-1.02x at 2k; from this threshold on, 0.97-1.05x
/// at 2k and 1.01-1.06x in 16 of 18 cells from 4k (bench/NOTES.md, Log).
inline constexpr int64_t kSectionMinKeys = 2048;
/// The last hardware named barrier id (bar.sync takes 0 to 15).
inline constexpr int64_t kLastNamedBarrier = 15;
} // namespace fa3::hopper

#endif
