// attn-hopper-pipeline is a pipeline of our passes, in the order of the IR
// levels (docs/design.md), each level visible with --mlir-print-ir-after-all:
// the op with its configuration, the tile level, the hopper ops (the
// consumers' math on register fragments, the kv loop block after block,
// the ring fills in the consumers' program, a persistent CTA's claim of
// its next tile among them, and then the producer thread that
// hopper-warp-specialize builds from them), their TMA transfers, the kv loop's
// software pipeline (intra-warpgroup overlap), the ping-pong, NVVM,
// and the tensor maps by value.
// RUN: fa3-opt %s --attn-hopper-pipeline=format=none --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s
// RUN: fa3-opt %s --attn-hopper-pipeline="format=none persistent=off" --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s --check-prefix=FILLS

// FILLS: IR Dump After ConvertAttnToHopper (convert-attn-to-hopper)
// FILLS: hopper.warp_specialize producer regs 24 {
// FILLS-NEXT: } consumers(%{{.*}} of 2) regs 240 {
// FILLS: hopper.ring.fill
// FILLS-NEXT: hopper.load_tile
// FILLS: IR Dump After HopperWarpSpecialize (hopper-warp-specialize)
// FILLS: hopper.warp_specialize producer regs 24 {
// FILLS-NEXT: hopper.producer_thread {
// FILLS: hopper.ring.producer_acquire
// FILLS-NEXT: hopper.load_tile
// FILLS: } consumers(
// FILLS-NOT: hopper.ring.fill
// FILLS: IR Dump After HopperAsyncCopy (hopper-async-copy)

// CHECK: IR Dump After OneShotBufferizePass
// CHECK: IR Dump After AttnHopperConfig (attn-hopper-config)
// CHECK: attn.flash_attention {{.*}}hopper_config = #attn.hopper_config<
// CHECK: IR Dump After AttnTile (attn-tile)
// CHECK: attn.kv_range
// CHECK: attn.tile_update
// CHECK: attn.tile_finalize
// CHECK: IR Dump After ConvertAttnToHopper (convert-attn-to-hopper)
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK-NEXT: } consumers(%{{.*}} of 2) regs 240 {
// CHECK-NOT: turn[
// CHECK: hopper.ring.fill
// CHECK: hopper.tile_claim
// CHECK: hopper.ring.publish
// CHECK: hopper.load_tile
// CHECK: scf.for
// CHECK: hopper.ring.fill
// CHECK: hopper.wgmma.ss
// CHECK: hopper.softmax_step
// CHECK: hopper.wgmma.rs
// CHECK: } {hopper.overlap}
// CHECK: } {hopper.pingpong}
// CHECK: IR Dump After HopperWarpSpecialize (hopper-warp-specialize)
// CHECK: hopper.producer_thread {
// CHECK: hopper.tile_claim
// CHECK-NEXT: hopper.ring.producer_acquire
// CHECK: } consumers(
// CHECK-NOT: hopper.ring.fill
// CHECK: IR Dump After HopperAsyncCopy (hopper-async-copy)
// CHECK: hopper.ring.producer_commit
// CHECK-NEXT: hopper.tma_load
// CHECK-NOT: hopper.load_tile
// CHECK: IR Dump After HopperOverlap (hopper-overlap)
// CHECK: scf.for %{{.*}} = %c1_i32 to
// CHECK: hopper.wgmma.ss
// CHECK-NEXT: hopper.wgmma.rs
// CHECK-NEXT: hopper.wgmma.wait 1
// CHECK-NOT: hopper.overlap
// CHECK: IR Dump After HopperPingPong (hopper-pingpong)
// CHECK: hopper.named_barrier.sync turn[
// CHECK: IR Dump After ConvertHopperToNVVM (convert-hopper-to-nvvm)
// CHECK-NOT: hopper.
// CHECK: nvvm.setmaxregister decrease 24
// CHECK: IR Dump After ConvertGpuOpsToNVVMOps (convert-gpu-to-nvvm)
// CHECK: IR Dump After AttnKernelParamsByValue (attn-kernel-params-by-value)
// CHECK: llvm.func @attention_kernel(%arg0: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}
func.func @attention(%q: memref<2x8x?x128xbf16>, %k: memref<2x2x?x128xbf16>,
                     %v: memref<2x2x?x128xbf16>, %o: memref<2x8x?x128xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<2x8x?x128xbf16>, memref<2x2x?x128xbf16>, memref<2x2x?x128xbf16>)
    outs(%o : memref<2x8x?x128xbf16>) causal
  return
}
