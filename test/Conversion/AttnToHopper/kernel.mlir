// convert-attn-to-hopper: from the tiled program to the warp-specialised
// kernel. Checks the roles, the TMA + mbarrier rings, both wgmma forms, the
// schedule and mask helpers built from attn.kv_range / the shared visibility
// test, the launch facts, and that the host function is replaced.
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=off" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --hopper-overlap --hopper-pingpong | FileCheck %s
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=off" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --hopper-overlap --hopper-pingpong --convert-hopper-to-nvvm | FileCheck %s --check-prefix=LOWER
// RUN: fa3-opt %s --attn-hopper-config="block-m=128 persistent=off" --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=SEQ

// The pass itself writes one program, the consumers', in which each ring
// slot's load stands where the slot is used (hopper.ring.fill, which
// hopper-warp-specialize gives to the producer thread:
// test/Dialect/Hopper/warp-specialize.mlir), as a tile of the slot (for
// hopper-async-copy, test/Dialect/Hopper/async-copy.mlir, to write its
// transfer): Q before its wait, K and V of block t before theirs ...
// SEQ: hopper.warp_specialize producer
// SEQ-NOT: hopper.load_tile
// SEQ: consumers(
// SEQ: hopper.ring.fill %[[QR:.*]][%c0_i32]
// SEQ-NEXT: hopper.load_tile %arg0[%{{.*}}, %{{.*}}, %{{.*}}] into %[[QR]][%c0_i32] rows 128 cols 128 : bf16
// SEQ-NEXT: }
// SEQ-NEXT: hopper.ring.consumer_wait %[[QR]][%c0_i32]
// ... and the consumer's kv loop sequential, block after block, for
// hopper-overlap (test/Dialect/Hopper/overlap.mlir) to pipeline:
// SEQ: %[[M0:.*]] = hopper.fill %{{.*}} : f32 to !hopper.frag<64xf32>
// SEQ-NEXT: %[[L0:.*]] = hopper.zero : !hopper.frag<64xf32>
// SEQ-NEXT: %[[O0:.*]] = hopper.zero : !hopper.frag<64x128xf32>
// SEQ-NEXT: scf.for %[[T:.*]] = %c0_i32 to %{{.*}} step %c1_i32 iter_args(%[[M:.*]] = %[[M0]], %[[L:.*]] = %[[L0]], %[[O:.*]] = %[[O0]])
// SEQ-NEXT: %[[U:.*]] = arith.addi %c0_i32, %[[T]]
// SEQ: hopper.ring.fill %[[KR:.*]][%[[U]]]
// SEQ-NEXT: hopper.load_tile %arg1[%{{.*}}, %{{.*}}, %{{.*}}] into %[[KR]][%[[U]]] rows 128 cols 128 : bf16
// SEQ: hopper.ring.fill %[[VR:.*]][%[[U]]]
// SEQ-NEXT: hopper.load_tile %arg2[%{{.*}}, %{{.*}}, %{{.*}}] into %[[VR]][%[[U]]] rows 128 cols 128 : bf16
// SEQ-NOT: hopper.tma_load
// SEQ: hopper.ring.consumer_wait %[[KR]][%[[U]]]
// SEQ: %[[S:.*]] = hopper.wgmma.ss
// SEQ-NEXT: hopper.wgmma.wait 0, %[[S]]
// SEQ: hopper.softmax_step %{{.*}} state(%[[M]], %[[L]]) threshold 8.000000e+00
// SEQ: hopper.scale_rows %[[O]]
// SEQ: nvvm.wgmma.fence.aligned
// SEQ-NEXT: %[[PV:.*]] = hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}}
// SEQ-NEXT: hopper.wgmma.wait 0, %[[PV]]
// SEQ: } {hopper.overlap}

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
// CHECK: gpu.func @attn_kernel(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[TMO:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: f32, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, {{.*}}, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i32) kernel
// CHECK-SAME: attn.launch = {block_m = 128 : i64, block_n = 128 : i64, causal = true, cluster_m = 1 : i64, dtype = "bf16", dynamic_smem = 196688 : i64, grid = "tiles", head_dim = 128 : i64, head_dim_v = 128 : i64, kernel = "attn_kernel", lazy_rescale = true, o_store = "tma", params = ["mapQ", "mapK", "mapV", "mapO", "O", "LSE", "tileCounter", "B", "Sq", "Skv", "Hq", "Hkv", "oStrideB", "oStrideS", "oStrideH", "scaleLog2", "cuSeqlensQ", "cuSeqlensK", "seqUsedK", "maxSeqlenQ", "numSplits", "oAccum", "lseAccum", "pageTable", "pageTableStride", "pageSize", "qDescale", "kDescale", "vDescale", "qDescaleStrideB", "qDescaleStrideH", "qDescaleStrideM", "kDescaleStrideB", "kDescaleStrideH", "kDescaleStrideN", "vDescaleStrideB", "vDescaleStrideH", "leftPadK", "pagedK", "pagedV", "pagedStridePage", "pagedStrideRow", "pagedStrideHead", "pagedPages"]
// CHECK-SAME: threads = 384 : i64, window_left = -1 : i64, window_right = 0 : i64
// CHECK-SAME: nvvm.maxntid = array<i32: 384, 1, 1>


// The pipeline rings in dynamic shared memory: Q (one buffer of 32 KiB at
// 0), K and V (2 stages of 32 KiB each, their own buffers and barriers);
// the empty barriers count the 256 consumer threads. One thread inits them.
// CHECK: %[[SMEM:.*]] = llvm.mlir.addressof @attn_smem : !llvm.ptr<3>
// CHECK-NEXT: %[[QR:.*]] = hopper.ring.create %[[SMEM]] : !hopper.ring<stages = 1, stage_bytes = 32768, data = 0, full = 196608, empty = 196616, arrivals = 256, cluster = 1>
// CHECK-NEXT: %[[KR:.*]] = hopper.ring.create %[[SMEM]] : !hopper.ring<stages = 2, stage_bytes = 32768, data = 32768, full = 196624, empty = 196656, arrivals = 256, cluster = 1>
// CHECK-NEXT: %[[VR:.*]] = hopper.ring.create %[[SMEM]] : !hopper.ring<stages = 2, stage_bytes = 32768, data = 98304, full = 196640, empty = 196672, arrivals = 256, cluster = 1>
// CHECK: %[[CTA:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK: hopper.ring.init %[[QR]]
// CHECK-NEXT: hopper.ring.init %[[KR]]
// CHECK-NEXT: hopper.ring.init %[[VR]]
// CHECK-NEXT: nvvm.fence.mbarrier.init
// CHECK: nvvm.prefetch tensormap
// CHECK: nvvm.barrier0

// Producer warpgroup: fewer registers. Its thread's program is the slice of
// the consumers' that their ring fills need (hopper-warp-specialize): the
// tile grid, the tile and its kv-block schedule, computed in this role too
// (nothing crosses setmaxnreg), then Q once and the K/V ring.
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK-NEXT: hopper.producer_thread {
// CHECK-NEXT: %[[NUMM:[^,]*]], %[[TILES:[^ ]*]] = hopper.tile_grid %arg8, %arg10, %arg7 block_m 128
// A 1-D grid over tiles (m-blocks fastest, so co-running CTAs share a head's
// K/V in L2); causal: the longest m-blocks (the last ones) come first, across
// a section of (head, batch) pairs whose K/V fit 32 MiB of L2: 65536 keys of
// 2 x 128 bf16 columns, over Skv (%arg9) keys a head; one pair (each head in
// turn) below 2048 keys; Hq x B pairs in all.
// CHECK-NEXT: %[[FEW:.*]] = arith.cmpi ult, %arg9, %c2048_i32
// CHECK-NEXT: %[[KEYS:.*]] = arith.maxui %arg9, %c1_i32
// CHECK-NEXT: %[[FIT:.*]] = arith.divui %c65536_i32, %[[KEYS]]
// CHECK-NEXT: %[[FIT1:.*]] = arith.maxui %[[FIT]], %c1_i32
// CHECK-NEXT: %[[SEC:.*]] = arith.select %[[FEW]], %c1_i32, %[[FIT1]]
// CHECK-NEXT: %[[PAIRS:.*]] = arith.muli %arg10, %arg7
// CHECK-NEXT: %[[ROW0:[^,]*]], %[[HEAD:[^,]*]], %[[BATCH:[^ ]*]] = hopper.tile_coords %[[CTA]] in %[[NUMM]], %arg10 block_m 128 longest_first sections %[[SEC]] of %[[PAIRS]]
// CHECK-NEXT: %[[RNG:.*]]:4 = func.call @attn_kernel_kv_range(%[[ROW0]]
// CHECK-NEXT: %[[NBLK:.*]] = arith.subi %[[RNG]]#1, %[[RNG]]#0
// Q's buffer is free (slot 0 of the Q ring: the CTA's one tile); the full
// barrier expects the tile's bytes, two 64-column boxes follow.
// CHECK: hopper.ring.producer_acquire %[[QR]][%c0_i32]
// CHECK-NEXT: hopper.ring.producer_commit %[[QR]][%c0_i32] tx 32768
// CHECK-NEXT: hopper.tma_load %arg0[%c0_i32, %[[HEAD]], %[[ROW0]], %[[BATCH]]] into %[[QR]][%c0_i32] at %c0_i32
// CHECK-NEXT: hopper.tma_load %arg0[%c64_i32, %[[HEAD]], %[[ROW0]], %[[BATCH]]] into %[[QR]][%c0_i32] at %c16384_i32
// K and V of each visited block t into slot u = t of their rings, inside
// the consumers' branch on a non-empty range.
// CHECK: scf.if
// CHECK-NEXT: scf.for %[[T:.*]] = %c0_i32 to %[[NBLK]]
// CHECK-NEXT: %[[U:.*]] = arith.addi %c0_i32, %[[T]]
// CHECK: hopper.ring.producer_acquire %[[KR]][%[[U]]]
// CHECK-NEXT: hopper.ring.producer_commit %[[KR]][%[[U]]] tx 32768
// CHECK-NEXT: hopper.tma_load %arg1[%c0_i32, {{.*}}] into %[[KR]][%[[U]]] at %c0_i32
// CHECK-NEXT: hopper.tma_load %arg1[%c64_i32, {{.*}}] into %[[KR]][%[[U]]] at %c16384_i32
// CHECK-NEXT: hopper.ring.producer_acquire %[[VR]][%[[U]]]
// CHECK-NEXT: hopper.ring.producer_commit %[[VR]][%[[U]]] tx 32768
// CHECK-NEXT: hopper.tma_load %arg2[%c0_i32, {{.*}}] into %[[VR]][%[[U]]] at %c0_i32
// CHECK-NEXT: hopper.tma_load %arg2[%c64_i32, {{.*}}] into %[[VR]][%[[U]]] at %c16384_i32
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }

// Consumers: more registers; consumer 1 opens consumer 0's first turn
// (ping-pong on the turn barriers, 256 threads each) ...
// CHECK: } consumers(%[[CW:.*]] of 2) regs 240 {
// CHECK: %[[OTHER:.*]] = arith.subi %c1_i32{{[_0-9]*}}, %[[CW]] : i32
// CHECK: hopper.named_barrier.arrive turn[%[[ZERO:c0_i32[_0-9]*]]] of 2 threads 256
// ... the tile's Q (slot 0), then the first block's K (ring slot 0): its
// stage's wgmma descriptor (2048 = 32 KiB >> 4 per stage) and its wait ...
// CHECK: hopper.ring.consumer_wait %[[QR]][%c0_i32]
// ... O starts at zero (m = -inf and l = 0 are the stateless first step) ...
// CHECK: %[[OZ:.*]] = hopper.zero : !hopper.frag<64x128xf32>
// CHECK: %[[KST0:.*]] = hopper.ring.stage %[[KR]][%c0_i32]
// CHECK-NEXT: arith.muli %[[KST0]], %c2048_i32 : i32
// CHECK: hopper.ring.consumer_wait %[[KR]][%c0_i32]
// ... S = Q K^T from shared memory (SS) within this warpgroup's turn ...
// CHECK: hopper.named_barrier.sync turn[%[[CW]]] of 2 threads 256
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[S0:.*]] = hopper.wgmma.ss %[[DQ:.*]], %{{.*}} k 128 boxes 16384, 16384 : bf16 -> !hopper.frag<64x128xf32>
// CHECK-NEXT: hopper.named_barrier.arrive turn[%[[OTHER]]] of 2 threads 256
// CHECK-NEXT: %[[S0R:.*]] = hopper.wgmma.wait 0, %[[S0]] : !hopper.frag<64x128xf32>
// ... K's stage released once S has retired ...
// CHECK-NEXT: hopper.ring.consumer_release %[[KR]][%c0_i32]
// ... the mask only inside the boundary branch (the fragment lowering is
// test/Conversion/HopperToNVVM/fragment.mlir) ...
// CHECK: scf.if %{{.*}} -> (!hopper.frag<64x128xf32>) {
// CHECK: %[[MK:.*]] = hopper.mask %[[S0R]] rows %{{.*}} cols %{{.*}} visible @attn_kernel_visible_cols(%arg8, %arg9) : !hopper.frag<64x128xf32>
// CHECK-NEXT: scf.yield %[[MK]]
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[S0R]]
// ... the first block's softmax (no state), P rounded to the register A
// operand of P V ...
// CHECK: %[[P0:.*]], %[[M0:.*]], %[[L0:.*]], %{{.*}}, %{{.*}} = hopper.softmax_step %{{.*}} scale %arg15 : !hopper.frag<64x128xf32>, !hopper.frag<64xf32>
// CHECK-NEXT: %[[PA0:.*]] = hopper.trunc %[[P0]] : !hopper.frag<64x128xf32> to !hopper.frag<64x128xbf16>
// ... then per block: S of this block, O += P V of the last (RS), the
// softmax while P V runs, with lazy rescaling (threshold 8 in log2 units):
// block t's K in ring slot u = g + t, block t - 1's V in slot u - 1, both
// waited for before the wgmma fence ...
// CHECK: scf.for %[[T:.*]] = %c1_i32 to %{{.*}} iter_args(%[[M:.*]] = %[[M0]], %[[L:.*]] = %[[L0]], %[[ACC:.*]] = %[[OZ]], %[[PA:.*]] = %[[PA0]]) -> (!hopper.frag<64xf32>, !hopper.frag<64xf32>, !hopper.frag<64x128xf32>, !hopper.frag<64x128xbf16>)
// CHECK-NEXT: %[[SLOT:.*]] = arith.addi %c0_i32, %[[T]] : i32
// CHECK-NEXT: hopper.ring.stage %[[KR]][%[[SLOT]]]
// CHECK: %[[PREV:.*]] = arith.subi %[[SLOT]], %c1_i32 : i32
// CHECK-NEXT: hopper.ring.stage %[[VR]][%[[PREV]]]
// CHECK: hopper.ring.consumer_wait %[[KR]][%[[SLOT]]]
// CHECK-NEXT: hopper.ring.consumer_wait %[[VR]][%[[PREV]]]
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[S:.*]] = hopper.wgmma.ss %[[DQ]], %{{.*}} k 128 boxes 16384, 16384
// CHECK-NEXT: %[[O:.*]] = hopper.wgmma.rs %[[PA]], %{{.*}}, %[[ACC]] : !hopper.frag<64x128xbf16>, !hopper.frag<64x128xf32>
// CHECK: hopper.wgmma.wait 1, %[[S]] : !hopper.frag<64x128xf32>
// CHECK-NEXT: hopper.ring.consumer_release %[[KR]][%[[SLOT]]]
// CHECK: hopper.softmax_step %{{.*}} scale %arg15 state(%[[M]], %[[L]]) threshold 8.000000e+00
// CHECK: hopper.wgmma.wait 0, %[[O]] : !hopper.frag<64x128xf32>
// CHECK: hopper.ring.consumer_release %[[VR]][%[[PREV]]]
// ... Q released after the tile's last S; the tail's P V of the last block.
// CHECK: hopper.ring.consumer_release %[[QR]][%c0_i32]
// CHECK: hopper.ring.consumer_wait %[[VR]][%[[LASTV:.*]]] :
// CHECK: hopper.wgmma.wait 0
// CHECK: hopper.ring.consumer_release %[[VR]][%[[LASTV]]]
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
// Consumer 0 takes the last turn consumer 1 handed over (barriers balanced),
// after its epilogue.
// CHECK: hopper.named_barrier.sync turn[%[[ZERO]]] of 2 threads 256
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
