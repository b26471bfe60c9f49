// convert-attn-to-hopper: from the tiled program to the warp-specialised
// kernel. Checks the roles, the TMA + mbarrier ring, both wgmma forms, the
// schedule and mask helpers built from attn.kv_range / the shared visibility
// test, the launch facts, and that the host function is replaced.
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=off" --attn-tile --convert-attn-to-hopper | FileCheck %s
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=off" --attn-tile --convert-attn-to-hopper --convert-hopper-to-nvvm | FileCheck %s --check-prefix=LOWER

// CHECK: module attributes {gpu.container_module}
// CHECK-NOT: func.func @attn(
// CHECK: gpu.module @attn_kernels {

// The schedule: attn.kv_range of the tiled IR, as a device function.
// CHECK: func.func private @attn_kernel_kv_range(%[[ROW0:.*]]: i32, %[[SQ:.*]]: i32, %[[SKV:.*]]: i32) -> (i32, i32, i32, i32)
// CHECK:   arith.ceildivsi
// CHECK:   return

// The mask of boundary blocks as per-row column bounds: causal band
// (col < row + Skv - Sq + 1), clamped to the Skv tail; no lower bound.
// CHECK: func.func private @attn_kernel_visible_cols(%{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32) -> (i32, i32)
// CHECK:   %[[DIAG:.*]] = arith.addi
// CHECK:   %[[END:.*]] = arith.addi %[[DIAG]], %c1
// CHECK:   %[[HI:.*]] = arith.minsi %[[END]]
// CHECK:   %[[HI32:.*]] = arith.index_cast %[[HI]] : index to i32
// CHECK:   return %{{.*}}, %[[HI32]] : i32, i32

// CHECK: llvm.mlir.global external @attn_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// CHECK: gpu.func @attn_kernel(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[TMO:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: f32) kernel
// CHECK-SAME: attn.launch = {block_m = 128 : i64, block_n = 128 : i64, causal = true, cluster_m = 1 : i64, dtype = "bf16", dynamic_smem = 196688 : i64, grid = "tiles", head_dim = 128 : i64, head_dim_v = 128 : i64, kernel = "attn_kernel", lazy_rescale = true, o_store = "tma", params = ["mapQ", "mapK", "mapV", "mapO", "O", "LSE", "tileCounter", "B", "Sq", "Skv", "Hq", "Hkv", "oStrideB", "oStrideS", "oStrideH", "scaleLog2"]
// CHECK-SAME: threads = 384 : i64, window_left = -1 : i64, window_right = 0 : i64
// CHECK-SAME: nvvm.maxntid = array<i32: 384, 1, 1>


// Barriers: q, K/V full (count 1 + tx bytes), K/V empty (256 consumer threads).
// CHECK: %[[CTA:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK: nvvm.mbarrier.init %{{.*}}, %{{.*}} : !llvm.ptr<3>, i32
// CHECK: nvvm.fence.mbarrier.init
// CHECK: nvvm.prefetch tensormap
// CHECK: nvvm.barrier0

// Producer warpgroup: fewer registers; Q once, then the K/V ring.
// CHECK: hopper.warp_specialize producer regs 24 {
// The tile grid is computed in each role (nothing crosses setmaxnreg).
// CHECK: %[[NUMM:.*]] = arith.divui %{{.*}}, %c128_i32 : i32
// CHECK: %[[HB:.*]] = arith.muli %arg10, %arg7 : i32
// A 1-D grid over tiles (m-blocks fastest, so co-running CTAs share a head's
// K/V in L2); causal: the longest m-blocks (the last ones) come first.
// CHECK: %[[REV:.*]] = arith.remui %[[CTA]], %[[NUMM]] : i32
// CHECK: %[[LAST:.*]] = arith.subi %[[NUMM]], %c1_i32 : i32
// CHECK: %[[MB:.*]] = arith.subi %[[LAST]], %[[REV]] : i32
// CHECK: %[[ROW0:.*]] = arith.muli %[[MB]], %c128_i32 : i32
// CHECK: func.call @attn_kernel_kv_range(%[[ROW0]]
// CHECK: nvvm.mbarrier.arrive.expect_tx
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0
// CHECK: scf.for
// CHECK:   nvvm.mbarrier.try_wait.parity
// CHECK:   nvvm.mbarrier.arrive.expect_tx
// CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1
// CHECK:   nvvm.mbarrier.try_wait.parity
// CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg2

// Consumers: more registers; consumer 1 opens consumer 0's first turn
// (ping-pong on the turn barriers, 256 threads each) ...
// CHECK: } consumers(%[[CW:.*]] of 2) regs 240 {
// CHECK: %[[OTHER:.*]] = arith.subi %c1_i32, %[[CW]] : i32
// CHECK: hopper.named_barrier.arrive turn[%c0_i32] of 2 threads 256
// ... S = Q K^T from shared memory (SS) within this warpgroup's turn ...
// CHECK: hopper.named_barrier.sync turn[%[[CW]]] of 2 threads 256
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: hopper.named_barrier.arrive turn[%[[OTHER]]] of 2 threads 256
// ... the mask only inside the boundary branch ...
// CHECK: scf.if %{{.*}} -> (f32
// CHECK: %[[COLS:.*]]:2 = func.call @attn_kernel_visible_cols
// CHECK: %[[HIREL:.*]] = arith.subi %[[COLS]]#1
// ... each score: one compare of its constant column offset, one select ...
// CHECK: %[[VIS:.*]] = arith.cmpi sgt, %[[HIREL]], %c0_i32 : i32
// CHECK-NEXT: arith.select %[[VIS]]
// CHECK: } else {
// CHECK-NOT: func.call @attn_kernel_visible_cols
// CHECK: scf.yield
// ... softmax with exp2 and quad shuffles ...
// CHECK: nvvm.shfl.sync bfly
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// ... and O += P V with P from registers (RS, inline PTX), overlapped with S of the next block.
// CHECK: scf.for
// CHECK: nvvm.wgmma.mma_async
// CHECK: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.mbarrier.arrive
// Consumer 0 takes the last turn consumer 1 handed over (barriers balanced).
// CHECK: hopper.named_barrier.sync turn[%c0_i32] of 2 threads 256
// Epilogue, as hopper ops on the fragments: 1 / l and LSE = (m + log2 l) ln 2
// of the rows, O / l stored by TMA through the staging buffer after the K/V
// ring (one tile per CTA: no wait for a previous store, no drain), the LSE
// of the warpgroup's rows m0 + 64 c ...
// CHECK: %[[INV:.*]], %[[LSE:.*]] = hopper.finalize_rows %{{.*}}, %{{.*}} : !hopper.frag<64xf32>
// CHECK: %[[WGROWS:.*]] = arith.muli %[[CW]], %c64_i32 : i32
// CHECK: %[[ROW0:.*]] = arith.addi %[[M0:.*]], %[[WGROWS]] : i32
// CHECK: hopper.store_o_tma %{{.*}}, %[[INV]] to %[[TMO]] tile(%[[M0]], %[[HEAD:.*]], %[[BATCH:.*]]) staging %{{.*}}[163840] consumer[%[[CW]]] of 2 : !hopper.frag<64x128xf32> as bf16
// CHECK-NEXT: hopper.store_lse %[[LSE]] to %{{.*}} rows %[[ROW0]] head %[[HEAD]] batch %[[BATCH]] heads %{{.*}} bound %{{.*}} : !hopper.frag<64xf32>
// CHECK-NOT: hopper.store_o_direct
// The CTA's shared memory outlives the store's reads.
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: gpu.return

// Lowered: the quad's sums, 1 / l by rcp.approx, LSE = (m + log2 l) ln 2;
// O / l staged in shared memory by stmatrix (8 per thread at head dim 128:
// 16 columns each), made visible to the async proxy, the warpgroup's
// epilogue barrier (3 + c), then one thread per warpgroup stores the
// warpgroup's rows by TMA (one box per 64 columns); LSE by plain stores.
// LOWER: gpu.func @attn_kernel(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[TMO:.*]]: !llvm.ptr,
// LOWER: nvvm.setmaxregister increase 240
// LOWER: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"
// LOWER: llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"
// LOWER-COUNT-8: nvvm.stmatrix {{.*}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>}
// LOWER-NOT: nvvm.stmatrix
// LOWER: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// LOWER-NEXT: %[[C3:.*]] = arith.constant 3 : i32
// LOWER-NEXT: %[[EPI:.*]] = arith.addi %{{.*}}, %[[C3]] : i32
// LOWER-NEXT: %[[N128:.*]] = arith.constant 128 : i32
// LOWER-NEXT: nvvm.barrier id = %[[EPI]] number_of_threads = %[[N128]]
// LOWER: nvvm.cp.async.bulk.tensor.global.shared.cta %[[TMO]], %{{.*}}, box[%c0_i32{{.*}}, 
// LOWER: nvvm.cp.async.bulk.tensor.global.shared.cta %[[TMO]], %{{.*}}, box[%c64_i32{{.*}}, 
// LOWER: nvvm.cp.async.bulk.commit.group
// LOWER-NOT: llvm.store {{.*}} vector<2xbf16>
// LOWER: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<1>
// LOWER: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<1>
// LOWER: nvvm.cp.async.bulk.wait_group 0 {read}
// LOWER: gpu.return
func.func @attn(%q: memref<?x4x?x128xbf16>, %k: memref<?x2x?x128xbf16>, %v: memref<?x2x?x128xbf16>,
                %o: memref<?x4x?x128xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x4x?x128xbf16>, memref<?x2x?x128xbf16>, memref<?x2x?x128xbf16>)
    outs(%o : memref<?x4x?x128xbf16>) causal
  return
}
