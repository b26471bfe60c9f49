// The backward's Hopper kernel: attn-hopper-config records its table
// (64 queries x 128 keys, 2 stages) on attn.flash_attention_grad, attn-tile
// carries it to attn.q_range, and convert-attn-to-hopper builds FA3's
// loop order: one CTA per kv block, K and V once, Q and dO per m-block of
// the q range; S^T and dP^T with keys as rows; dV and dK accumulated in
// registers; dS^T staged for dQ = dS K (the warpgroups split dQ's columns
// and read each other's dS^T, two buffers); dQ staged in accumulator order
// for the producer's dQ writer (warp 1), which adds each warpgroup's by one
// bulk reduction (tma-store=false: the consumers' vector atomics); dK *
// scale and dV stored. Beside the kernel, <kernel>_pre (D = rowsum(dO o),
// dQaccum zeroed) and <kernel>_post (dQ = scale dQaccum, read back from the
// accumulator order).
// RUN: fa3-opt %s --split-input-file --attn-hopper-config | FileCheck %s --check-prefix=CONFIG
// RUN: fa3-opt %s --split-input-file --attn-hopper-config --attn-tile --convert-attn-to-hopper --hopper-warp-specialize | FileCheck %s
// RUN: fa3-opt %s --split-input-file --attn-hopper-config=tma-store=false --attn-tile --convert-attn-to-hopper --hopper-warp-specialize | FileCheck %s --check-prefix=ATOMIC
// RUN: fa3-opt %s --split-input-file --attn-hopper-config --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --convert-hopper-to-nvvm | FileCheck %s --check-prefix=NVVM
// RUN: fa3-opt %s --split-input-file --attn-hopper-config --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=ORDER

// CONFIG-LABEL: func.func @bwd128
// CONFIG: attn.flash_attention_grad {{.*}} causal {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 0.000000e+00, cluster_m = 1, pingpong = false, tma_store = true>}

// The tiles' order: causal, in L2 sections of (kv head, batch) pairs with
// the kv block slowest and the first (the longest) first; the rest, and
// windows, kv block fastest.
// ORDER-LABEL: gpu.module @bwd128_kernels
// ORDER: hopper.tile_coords %{{.*}} in %{{.*}}, %{{.*}} block_m 128 sections %{{.*}} of %{{.*}}
// ORDER-NOT: longest_first
// ORDER-LABEL: gpu.module @bwd64_kernels
// ORDER: hopper.tile_coords %{{.*}} in %{{.*}}, %{{.*}} block_m 128{{$}}
// ORDER-LABEL: gpu.module @bwd_window_softcap_kernels
// ORDER: hopper.tile_coords %{{.*}} in %{{.*}}, %{{.*}} block_m {{[0-9]+}}{{$}}
// CHECK-LABEL: gpu.module @bwd128_kernels
// CHECK: func.func private @bwd128_kernel_q_range(%{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32) -> (i32, i32, i32, i32)
// CHECK: func.func private @bwd128_kernel_visible_cols(
// CHECK: gpu.func @bwd128_kernel(%[[MAPQ:[^:]*]]: !llvm.ptr, %[[MAPK:[^:]*]]: !llvm.ptr, %[[MAPV:[^:]*]]: !llvm.ptr, %[[MAPDO:[^:]*]]: !llvm.ptr, %[[DQ:[^:]*]]: !llvm.ptr<1>, %[[DK:[^:]*]]: !llvm.ptr<1>, %[[DV:[^:]*]]: !llvm.ptr<1>, %[[LSE:[^:]*]]: !llvm.ptr<1>, %[[DELTA:[^:]*]]: !llvm.ptr<1>,
// CHECK-SAME: attn.launch = {backward = true, block_m = 64 : i64, block_n = 128 : i64, causal = true, dtype = "bf16", dynamic_smem = 198784 : i64, grid = "tiles", head_dim = 128 : i64, head_dim_v = 128 : i64, kernel = "bwd128_kernel", params = ["mapQ", "mapK", "mapV", "mapdO", "dQaccum", "dK", "dV", "LSE", "delta", "B", "Sq", "Skv", "Hq", "Hkv", "dkvStrideB", "dkvStrideS", "dkvStrideH", "scaleLog2"]
// CHECK: %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// K and V (one stage each), Q and dO (two stages) rings.
// CHECK: %[[KR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 1, stage_bytes = 32768, data = 0,
// CHECK: %[[VR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 1, stage_bytes = 32768, data = 32768,
// CHECK: %[[QR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 16384, data = 65536,
// CHECK: %[[OR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 16384, data = 98304,
// A step's LSE and D: a ring of 1 KiB stages after dQ's staging buffers,
// committed by the 32 lanes that write it.
// CHECK: %[[RR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 1024, data = 196608, {{.*}}, producers = 32>
// The producer warpgroup's roles: thread 0 loads K, V, Q and dO (the
// program hopper-warp-specialize slices from the consumers' ring fills); warp 1
// adds the staged dQ; warp 2 loads LSE and D.
// CHECK: hopper.warp_specialize producer regs 24 {
// CHECK-NEXT: hopper.producer_thread {
// CHECK: call @bwd128_kernel_q_range(
// CHECK: hopper.load_tile %[[MAPK]][{{.*}}] into %[[KR]][{{.*}}] rows 128 cols 128
// CHECK: hopper.load_tile %[[MAPV]][{{.*}}] into %[[VR]][{{.*}}] rows 128 cols 128
// CHECK: scf.for
// CHECK: hopper.load_tile %[[MAPQ]][{{.*}}] into %[[QR]][{{.*}}] rows 64 cols 128
// CHECK: hopper.load_tile %[[MAPDO]][{{.*}}] into %[[OR]][{{.*}}] rows 64 cols 128
// CHECK: hopper.producer_warps(%{{.*}}) first 1 count 1 {
// The dQ writer: both buffers free before the first step; per step each
// warpgroup's staged dQ (64 x 64 f32, at 160 KiB and 176 KiB) added by one
// bulk reduction, then freed once read (all but the newest group, then
// all), not after the last step; the reductions done before exit.
// CHECK: hopper.named_barrier.arrive reduce_free[%c0_i32] of 2 threads 160
// CHECK: hopper.named_barrier.arrive reduce_free[%c1_i32] of 2 threads 160
// CHECK: scf.for
// CHECK: hopper.named_barrier.sync reduce_full[%c0_i32] of 2 threads 160
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c163840_i32] to %{{.*}} bytes 16384
// CHECK: hopper.named_barrier.sync reduce_full[%c1_i32] of 2 threads 160
// CHECK: hopper.reduce_add_bulk %{{.*}}[%c180224_i32] to %{{.*}} bytes 16384
// CHECK: nvvm.cp.async.bulk.wait_group 1 {read}
// CHECK: nvvm.bar.warp.sync
// CHECK: hopper.named_barrier.arrive reduce_free[%c0_i32] of 2 threads 160
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: hopper.named_barrier.arrive reduce_free[%c1_i32] of 2 threads 160
// CHECK: nvvm.cp.async.bulk.wait_group 0{{$}}
// Warp 2 stages each step's LSE as -lse log2 e (-inf past Sq: p = 0) and D
// (0 past Sq).
// CHECK: hopper.producer_warps(%{{.*}}) first 2 count 1 {
// CHECK: scf.for
// CHECK: hopper.ring.producer_acquire %[[RR]]
// CHECK: hopper.stage_rows %[[LSE]][%{{.*}}] rows %{{.*}} bound %{{.*}} fill %[[NINF]] to %{{.*}}[%{{.*}}] count 64 neg_log2{{$}}
// CHECK: hopper.stage_rows %[[DELTA]][%{{.*}}] rows %{{.*}} bound %{{.*}} fill %cst{{.*}} to %{{.*}}[%{{.*}}] count 64
// CHECK-NEXT: hopper.ring.producer_commit %[[RR]][%{{.*}}] tx 0
// CHECK: } consumers(%[[CW0:.*]] of 2) regs 240 {
// CHECK: %[[CW:.*]] = hopper.warp_uniform %[[CW0]] : i32
// CHECK: %{{.*}}:2 = scf.for %[[STEP:[^ ]*]] = {{.*}} -> (!hopper.frag<64x128xf32>, !hopper.frag<64x128xf32>)
// Each step re-derives the descriptors that do not change (K's and V's as
// S^T's and dP^T's A, K's as dQ's B) from a zero neither LLVM nor ptxas
// folds, so that ptxas does not hoist their k-steps out of the loop.
// CHECK: %[[Z32:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "shr.u32 $0, $1, 31;", "=r,r" %[[STEP]] : (i32) -> i32
// CHECK-NEXT: %[[Z:.*]] = arith.extui %[[Z32]] : i32 to i64
// CHECK-NEXT: %[[KDESC:.*]] = arith.addi %{{.*}}, %[[Z]] : i64
// CHECK-NEXT: %[[VDESC:.*]] = arith.addi %{{.*}}, %[[Z]] : i64
// CHECK-NEXT: %[[KTDESC:.*]] = arith.addi %{{.*}}, %[[Z]] : i64
// CHECK: %[[S:.*]] = hopper.wgmma.ss %[[KDESC]], %{{.*}} k 128 boxes 16384, 8192 : bf16 -> !hopper.frag<64x64xf32>
// CHECK: %[[DP:.*]] = hopper.wgmma.ss %[[VDESC]], %{{.*}} k 128 boxes 16384, 8192 : bf16 -> !hopper.frag<64x64xf32>
// Head dim 128 with a mask (the table): LSE read where each block of
// columns is used, D as a whole vector before the rows are released.
// CHECK: hopper.ring.consumer_wait %[[RR]]
// CHECK-NEXT: %[[STAGE:.*]] = hopper.ring.stage %[[RR]]
// CHECK-NEXT: %[[SOFF:.*]] = arith.muli %[[STAGE]], %c1024_i32
// CHECK-NEXT: %[[ROWS:.*]] = arith.addi %[[SOFF]], %c196608_i32
// CHECK-NOT: hopper.load_columns
// CHECK: %[[S1:.*]] = hopper.wgmma.wait 1, %[[S]]
// CHECK: scf.if
// CHECK: hopper.mask %[[S1]] rows %{{.*}} cols %{{.*}} visible @bwd128_kernel_visible_cols(%{{.*}}, %{{.*}}) transposed
// CHECK: %[[P:.*]] = hopper.grad_probs %{{.*}}, columns %{{.*}}[%[[ROWS]]] scale %{{.*}} lse_neg_log2 :
// CHECK: %[[D:.*]] = hopper.load_columns
// CHECK: hopper.ring.consumer_release %[[RR]]
// CHECK: %[[DP1:.*]] = hopper.wgmma.wait 0, %[[DP]]
// CHECK: %[[DS:.*]] = hopper.grad_scores %[[P]], %[[DP1]], %[[D]]
// CHECK: %[[PA:.*]] = hopper.trunc %[[P]] : !hopper.frag<64x64xf32> to !hopper.frag<64x64xbf16>
// CHECK: %[[DSA:.*]] = hopper.trunc %[[DS]]
// FA3's order: dV += P^T dO first, which the tensor pipe runs while dS^T
// goes to shared memory and the warpgroups meet; then dQ = dS K and
// dK += dS^T Q, dQ staged for the writer while dK runs; Q and dO released
// once dK has read Q.
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[DVP:.*]] = hopper.wgmma.rs %[[PA]], %{{.*}}, %{{.*}} : !hopper.frag<64x64xbf16>, !hopper.frag<64x128xf32>
// CHECK-NEXT: hopper.store_shared %[[DSA]] to %{{.*}}[%{{.*}}] box_bytes 0 stmatrix :
// CHECK-NEXT: hopper.named_barrier.sync stage[%{{.*}}] of 2 threads 256
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[DQT:.*]] = hopper.wgmma.ss %{{.*}}, %[[KTDESC]] k 128 boxes 0, 0 {a_mn_major, b_mn_major} : bf16 -> !hopper.frag<64x64xf32>
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[DKP:.*]] = hopper.wgmma.rs %[[DSA]], %{{.*}}, %{{.*}} : !hopper.frag<64x64xbf16>, !hopper.frag<64x128xf32>
// CHECK-NEXT: %[[DVQ:.*]]:2 = hopper.wgmma.wait 1, %[[DVP]], %[[DQT]]
// CHECK-NEXT: hopper.named_barrier.sync reduce_free[%[[CW]]] of 2 threads 160
// CHECK-NEXT: hopper.stage_fragment %[[DVQ]]#1 to %{{.*}}[%{{.*}}] : !hopper.frag<64x64xf32>
// CHECK-NEXT: hopper.named_barrier.arrive reduce_full[%[[CW]]] of 2 threads 160
// CHECK-NEXT: hopper.wgmma.wait 0, %[[DKP]]
// CHECK-NEXT: hopper.ring.consumer_release %[[OR]]
// CHECK-NEXT: hopper.ring.consumer_release %[[QR]]
// ATOMIC-LABEL: gpu.module @bwd128_kernels
// ATOMIC: dynamic_smem = 166016
// ATOMIC-NOT: hopper.producer_warps(%{{.*}}) first 1
// ATOMIC-NOT: hopper.reduce_add_bulk
// ATOMIC: hopper.reduce_add %{{.*}} to %{{.*}} : !hopper.frag<64x64xf32>
// ATOMIC-NOT: reduce_full
// dK * scale and dV staged in the Q and dO rings (at 65536, free once both
// warpgroups have left the loop: their barrier), copied out in 16-byte
// units; dV's staging waits for dK's copy-out.
// CHECK: hopper.named_barrier.sync stage[%{{.*}}] of 2 threads 256
// CHECK: hopper.store_o %{{.*}}#0, %{{.*}} to %[[DK]] strides({{.*}}) rows %{{.*}} head %{{.*}} batch %{{.*}} bound %{{[a-z0-9_]+}} staging %{{.*}}[65536] consumer[%[[CW]]] of 2 : !hopper.frag
// CHECK: hopper.store_o %{{.*}}#1, %{{.*}} to %[[DV]] strides({{.*}}) rows %{{.*}} head %{{.*}} batch %{{.*}} bound %{{[a-z0-9_]+}} staging %{{.*}}[65536] consumer[%[[CW]]] of 2 wait_previous : !hopper.frag
// Head dim 128: 16 lanes a row (16 bytes each), 16 rows a block; the row
// sum over the lanes by 4 butterflies; delta by the row's first lane; then
// dQaccum (ceil(Sq / 64) 64-row tiles) zeroed 16 bytes a thread.
// CHECK: gpu.func @bwd128_kernel_pre(%[[O:[^:]*]]: !llvm.ptr<1>, %[[GO:[^:]*]]: !llvm.ptr<1>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %[[D:[^:]*]]: !llvm.ptr<1>, %[[ACC:[^:]*]]: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32) kernel attributes {nvvm.maxntid = array<i32: 256, 1, 1>
// CHECK: arith.remui %{{.*}}, %c16_i32
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} : i64 {
// CHECK: llvm.getelementptr %[[O]]
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK: llvm.getelementptr %[[GO]]
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK-COUNT-4: nvvm.shfl.sync bfly
// CHECK-NOT: nvvm.shfl.sync
// CHECK: llvm.getelementptr %[[D]]
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
// CHECK: arith.addi %{{.*}}, %c63_i64
// CHECK: arith.divui %{{.*}}, %c64_i64
// CHECK: arith.muli %{{.*}}, %c8192_i64
// CHECK: scf.for
// CHECK: llvm.getelementptr %[[ACC]]
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
// CHECK-NOT: llvm.store
// _post: a CTA converts a chunk of 256 units (a 64 x 64 block of dQ) at a
// time, the chunks in dQ's order: loaded 16 bytes a thread, consecutive
// threads on consecutive bytes, into shared memory (runs of 2 KiB, 16
// bytes apart), then 16 bytes (8 columns) of two rows a thread, 8 threads
// a row, each below Sq.
// CHECK: llvm.mlir.global internal @bwd128_kernel_post_stage() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<16512 x i8>
// CHECK: gpu.func @bwd128_kernel_post(%[[PACC:[^:]*]]: !llvm.ptr<1>, %[[DQO:[^:]*]]: !llvm.ptr<1>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %[[SC:[^:]*]]: f32) kernel
// CHECK: %[[STAGE:.*]] = llvm.mlir.addressof @bwd128_kernel_post_stage : !llvm.ptr<3>
// CHECK: scf.for
// CHECK: arith.divui %{{.*}}, %c2_i64
// CHECK-COUNT-4: llvm.getelementptr %[[STAGE]]
// CHECK: nvvm.barrier0
// CHECK-COUNT-4: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xf32>
// CHECK: arith.mulf %{{.*}}, %[[SC]] : f32
// CHECK: arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK: arith.cmpi ult
// CHECK: scf.if
// CHECK: llvm.getelementptr %[[DQO]]
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK: scf.if
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK: nvvm.barrier0
// NVVM-LABEL: gpu.module @bwd128_kernels
// NVVM: nvvm.cp.async.bulk.tensor.shared.cluster.global
// NVVM: cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32
// NVVM: nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// NVVM: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// NVVM: nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// NVVM: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
func.func @bwd128(%q: memref<?x1x?x128xbf16>, %k: memref<?x1x?x128xbf16>, %v: memref<?x1x?x128xbf16>,
                  %o: memref<?x1x?x128xbf16>, %do: memref<?x1x?x128xbf16>, %lse: memref<?x1x?xf32>,
                  %dq: memref<?x1x?x128xbf16>, %dk: memref<?x1x?x128xbf16>, %dv: memref<?x1x?x128xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>) causal
  return
}

// -----

// Head dim 64: steps of 128 queries, the warpgroups split dQ's rows (64
// each, all 64 columns over all 128 keys, one barrier of both).
// CHECK-LABEL: gpu.module @bwd64_kernels
// CHECK: attn.launch = {backward = true, block_m = 128 : i64, {{.*}}causal = false
// Without a mask dV's product is issued after dS^T's stores (dvAfterDs).
// CHECK: hopper.store_shared %{{.*}} to %{{.*}}[%{{.*}}] box_bytes 16384 stmatrix : !hopper.frag<64x128xf16>
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NEXT: hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}} : !hopper.frag<64x128xf16>, !hopper.frag<64x64xf32>
// CHECK-NEXT: hopper.named_barrier.sync stage[%{{.*}}] of 2 threads 256
// CHECK: hopper.wgmma.ss %{{.*}}, %{{.*}} k 128 boxes 0, 0 {a_mn_major, b_mn_major} : f16 -> !hopper.frag<64x64xf32>
// CHECK: hopper.stage_fragment %{{.*}} to %{{.*}}[%{{.*}}] : !hopper.frag<64x64xf32>
// Head dim 64, f16: 8 lanes a row, 3 butterflies.
// CHECK: gpu.func @bwd64_kernel_pre(
// CHECK: arith.remui %{{.*}}, %c8_i32
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xf16>
// CHECK-COUNT-3: nvvm.shfl.sync bfly
// CHECK-NOT: nvvm.shfl.sync
// CHECK: gpu.func @bwd64_kernel_post(
// CHECK: arith.truncf %{{.*}} : vector<2xf32> to vector<2xf16>
// ATOMIC-LABEL: gpu.module @bwd64_kernels
// ATOMIC: hopper.reduce_add %{{.*}} to %{{.*}} : !hopper.frag<64x32xf32>
// NVVM-LABEL: gpu.module @bwd64_kernels
// NVVM: cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32
func.func @bwd64(%q: memref<?x1x?x64xf16>, %k: memref<?x1x?x64xf16>, %v: memref<?x1x?x64xf16>,
                 %o: memref<?x1x?x64xf16>, %do: memref<?x1x?x64xf16>, %lse: memref<?x1x?xf32>,
                 %dq: memref<?x1x?x64xf32>, %dk: memref<?x1x?x64xf16>, %dv: memref<?x1x?x64xf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x64xf16>, memref<?x1x?x64xf16>, memref<?x1x?x64xf16>, memref<?x1x?x64xf16>, memref<?x1x?x64xf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x64xf32>, memref<?x1x?x64xf16>, memref<?x1x?x64xf16>)
  return
}

// -----

// A sliding window and softcap (Gemma-2's 30): the kernel's
// visible_cols bound both sides and the mask tests the lower one; the
// scores' tanh (hopper.softcap, x scale / 30) comes before the mask and
// is kept for dS's factor 1 - t^2 (hopper.grad_softcap); p = exp2(t 30
// log2 e - lse log2 e). The facts record both.
// CHECK-LABEL: gpu.module @bwd_window_softcap_kernels
// CHECK: attn.launch = {backward = true, {{.*}}causal = false, {{.*}}softcap = 3.000000e+01 : f64, {{.*}}window_left = 100 : i64, window_right = 50 : i64}
// CHECK: %[[OVERCAP:.*]] = arith.constant 0.0231049061 : f32
// CHECK: %[[CAPL2E:.*]] = arith.constant 43.2808495 : f32
// CHECK: hopper.warp_specialize
// CHECK: } consumers(
// CHECK: %[[PRE:.*]] = arith.mulf %{{.*}}, %[[OVERCAP]] : f32
// CHECK: scf.for
// CHECK: %[[S:.*]] = hopper.wgmma.wait 1, %{{.*}}
// CHECK: %[[T:.*]] = hopper.softcap %[[S]], %[[PRE]] : !hopper.frag<64x64xf32>
// Head dim 64: the mask as the window's band of key - query, [Skv - Sq -
// 100, Skv - Sq + 51) (i64: Skv and Sq zero-extended).
// CHECK: %[[SKV:.*]] = arith.extui %{{.*}} : i32 to i64
// CHECK: %[[SQ:.*]] = arith.extui %{{.*}} : i32 to i64
// CHECK: %[[OFF:.*]] = arith.subi %[[SKV]], %[[SQ]] : i64
// CHECK: %[[LO:.*]] = arith.subi %[[OFF]], %c100_i64 : i64
// CHECK: %[[HI:.*]] = arith.addi %[[OFF]], %c51_i64 : i64
// CHECK: hopper.band_mask %[[T]] rows %{{.*}} cols %{{.*}} keys %{{.*}} lo %[[LO]] hi %[[HI]] : !hopper.frag<64x64xf32>
// Head dim 64 (the table): LSE and D read where used, the rows released
// after D's last read.
// CHECK: %[[P:.*]] = hopper.grad_probs %{{.*}}, columns %{{.*}}[%[[LOFF:.*]]] scale %[[CAPL2E]] lse_neg_log2 : !hopper.frag<64x64xf32>
// CHECK: %[[DOFF:.*]] = arith.addi %[[LOFF]], %c256_i32
// CHECK: %[[DS:.*]] = hopper.grad_scores %[[P]], %{{.*}}, columns %{{.*}}[%[[DOFF]]] : !hopper.frag<64x64xf32>
// CHECK-NEXT: hopper.ring.consumer_release
// CHECK-NEXT: hopper.grad_softcap %[[DS]], %[[T]] : !hopper.frag<64x64xf32>
// ATOMIC-LABEL: gpu.module @bwd_window_softcap_kernels
// NVVM-LABEL: gpu.module @bwd_window_softcap_kernels
// NVVM: nvvm.wgmma.mma_async
// NVVM: tanh.approx.f32
func.func @bwd_window_softcap(%q: memref<?x1x?x64xbf16>, %k: memref<?x1x?x64xbf16>, %v: memref<?x1x?x64xbf16>,
                              %o: memref<?x1x?x64xbf16>, %do: memref<?x1x?x64xbf16>, %lse: memref<?x1x?xf32>,
                              %dq: memref<?x1x?x64xbf16>, %dk: memref<?x1x?x64xbf16>, %dv: memref<?x1x?x64xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>) window(100, 50) softcap(30.0)
  return
}

// -----

// Head dim 256 (the table: 64 keys, one Q / dO stage and dQ staged for
// the bulk reductions: the dQ staging and two stages do not fit together):
// CHECK-LABEL: gpu.module @bwd256_kernels
// CHECK: attn.launch = {backward = true, block_m = 64 : i64, block_n = 64 : i64, {{.*}}dynamic_smem = 230480 : i64, {{.*}}head_dim = 256 : i64
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 1, stage_bytes = 32768, data = 65536,
// CHECK: hopper.ring.create %{{.*}} : !hopper.ring<stages = 1, stage_bytes = 32768, data = 98304,
// CHECK: hopper.reduce_add_bulk
// With one stage Q's and dO's descriptors do not change either: all of
// S^T's and dP^T's operands are formed at the step from the opaque zero.
// CHECK: scf.for %[[STEP:[^ ]*]] =
// CHECK: %[[Z32:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "shr.u32 $0, $1, 31;", "=r,r" %[[STEP]] : (i32) -> i32
// CHECK-NEXT: %[[Z:.*]] = arith.extui %[[Z32]] : i32 to i64
// CHECK-NEXT: %[[KD:.*]] = arith.addi %{{.*}}, %[[Z]] : i64
// CHECK-NEXT: %[[VD:.*]] = arith.addi %{{.*}}, %[[Z]] : i64
// CHECK-NEXT: arith.addi %{{.*}}, %[[Z]] : i64
// CHECK-NEXT: %[[QD:.*]] = arith.addi %{{.*}}, %[[Z]] : i64
// CHECK-NEXT: %[[DOD:.*]] = arith.addi %{{.*}}, %[[Z]] : i64
// CHECK: hopper.wgmma.ss %[[KD]], %[[QD]] k 256 boxes 8192, 8192 : bf16 -> !hopper.frag<64x32xf32>
// CHECK: hopper.wgmma.ss %[[VD]], %[[DOD]] k 256 boxes 8192, 8192 : bf16 -> !hopper.frag<64x32xf32>
// CHECK: %[[DQ1:.*]] = hopper.wgmma.wait 0, %{{.*}} : !hopper.frag<64x128xf32>
// CHECK-NEXT: hopper.named_barrier.sync reduce_free[%{{.*}}] of 2 threads 160
// CHECK-NEXT: hopper.stage_fragment %[[DQ1]] to
// CHECK-NOT: hopper.reduce_add %
// With tma-store=false (the ATOMIC run), two stages and the consumers'
// atomics (the table's form before the descriptors were formed at use:
// bench/NOTES.md, Log; the deterministic kernel's one stage:
// fa3-opt/fa3-compile-options.test): both warpgroups see
// the block's 64 keys. Each computes S^T and dP^T for its 32 of the step's
// 64 queries (its rows of Q and dO, its columns of LSE and D), stores its
// columns of P^T and dS^T into the shared tiles, and after the barrier
// accumulates its half of dV and dK's columns from those tiles (wgmma SS
// with an accumulator, dO and Q MN-major); Q and dO go back to the
// producer before dQ's product, which reads only K and dS^T. dK and dV are
// stored from the warpgroup's first column.
// ATOMIC-LABEL: gpu.module @bwd256_kernels
// ATOMIC: attn.launch = {backward = true, block_m = 64 : i64, block_n = 64 : i64, {{.*}}dynamic_smem = 231552 : i64, {{.*}}head_dim = 256 : i64
// ATOMIC: %[[QR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536,
// ATOMIC: %[[OR:.*]] = hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, stage_bytes = 32768, data = 131072,
// ATOMIC: } consumers(%[[CW0:.*]] of 2) regs 240 {
// ATOMIC: %[[CW:.*]] = hopper.warp_uniform %[[CW0]] : i32
// ATOMIC: %[[HALF:.*]] = arith.muli %[[CW]], %c32_i32
// ATOMIC: scf.for {{.*}} -> (!hopper.frag<64x128xf32>, !hopper.frag<64x128xf32>)
// ATOMIC: hopper.wgmma.ss %{{.*}}, %{{.*}} k 256 boxes 8192, 8192 : bf16 -> !hopper.frag<64x32xf32>
// ATOMIC: hopper.wgmma.ss %{{.*}}, %{{.*}} k 256 boxes 8192, 8192 : bf16 -> !hopper.frag<64x32xf32>
// ATOMIC: hopper.load_columns %{{.*}}[%{{.*}}] : !hopper.frag<64x32xf32>
// ATOMIC: hopper.mask %{{.*}} transposed : !hopper.frag<64x32xf32>
// ATOMIC: hopper.store_shared %{{.*}} to %{{.*}}[%{{.*}}] column %[[HALF]] box_bytes 0 : !hopper.frag<64x32xbf16>
// ATOMIC: hopper.store_shared %{{.*}} to %{{.*}}[%{{.*}}] column %[[HALF]] box_bytes 0 : !hopper.frag<64x32xbf16>
// ATOMIC: hopper.named_barrier.sync stage[%{{.*}}] of 2 threads 256
// ATOMIC: %[[DV:.*]] = hopper.wgmma.ss %{{.*}}, %{{.*}} acc %{{.*}} k 64 boxes 8192, 0 {b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
// ATOMIC: %[[DK:.*]] = hopper.wgmma.ss %{{.*}}, %{{.*}} acc %{{.*}} k 64 boxes 8192, 0 {b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
// Under a mask dQ's product follows with no wait between (bwd256_full
// below: without one, after dV and dK have retired).
// ATOMIC-NEXT: %[[DQ:.*]] = hopper.wgmma.ss %{{.*}}, %{{.*}} k 64 boxes 0, 0 {a_mn_major, b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
// ATOMIC-NEXT: hopper.wgmma.wait 1, %[[DV]], %[[DK]]
// ATOMIC-NEXT: hopper.ring.consumer_release %[[QR]]
// ATOMIC-NEXT: hopper.ring.consumer_release %[[OR]]
// ATOMIC-NEXT: %[[DQR:.*]] = hopper.wgmma.wait 0, %[[DQ]]
// ATOMIC: hopper.reduce_add %[[DQR]] to %{{.*}} : !hopper.frag<64x128xf32>
// ATOMIC: %[[FIRST:.*]] = arith.muli %[[CW]], %c128_i32
// ATOMIC: %[[DKP:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
// ATOMIC: %[[DVP:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
// ATOMIC: hopper.store_o %{{.*}}#0, %{{.*}} to %[[DKP]] {{.*}} staging %{{.*}}[65536] consumer[%[[CW]]] of 2 : !hopper.frag<64x128xf32> as bf16
// ATOMIC: hopper.store_o %{{.*}}#1, %{{.*}} to %[[DVP]] {{.*}} staging %{{.*}}[65536] consumer[%[[CW]]] of 2 wait_previous : !hopper.frag<64x128xf32> as bf16
// NVVM-LABEL: gpu.module @bwd256_kernels
// NVVM: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 32, k = 16>
// NVVM: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
func.func @bwd256(%q: memref<?x1x?x256xbf16>, %k: memref<?x1x?x256xbf16>, %v: memref<?x1x?x256xbf16>,
                  %o: memref<?x1x?x256xbf16>, %do: memref<?x1x?x256xbf16>, %lse: memref<?x1x?xf32>,
                  %dq: memref<?x1x?x256xbf16>, %dk: memref<?x1x?x256xbf16>, %dv: memref<?x1x?x256xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x256xbf16>, memref<?x1x?x256xbf16>, memref<?x1x?x256xbf16>, memref<?x1x?x256xbf16>, memref<?x1x?x256xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x256xbf16>, memref<?x1x?x256xbf16>, memref<?x1x?x256xbf16>) causal
  return
}

// -----

// Head dim 256 without a mask: dQ's product after dV and dK have retired
// (no mask: issuing it behind them measured 1 % slower from 8k).
// CHECK-LABEL: gpu.module @bwd256_full_kernels
// CHECK: %[[DV:.*]] = hopper.wgmma.ss %{{.*}}, %{{.*}} acc %{{.*}} k 64 boxes 8192, 0 {b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
// CHECK-NEXT: %[[DK:.*]] = hopper.wgmma.ss %{{.*}}, %{{.*}} acc %{{.*}} k 64 boxes 8192, 0 {b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
// CHECK-NEXT: hopper.wgmma.wait 0, %[[DV]], %[[DK]]
// CHECK-NEXT: hopper.ring.consumer_release
// CHECK-NEXT: hopper.ring.consumer_release
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[DQ:.*]] = hopper.wgmma.ss %{{.*}}, %{{.*}} k 64 boxes 0, 0 {a_mn_major, b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
// CHECK-NEXT: %[[DQR:.*]] = hopper.wgmma.wait 0, %[[DQ]]
// CHECK-NEXT: hopper.named_barrier.sync reduce_free
// CHECK-NEXT: hopper.stage_fragment %[[DQR]] to
// ATOMIC-LABEL: gpu.module @bwd256_full_kernels
// ATOMIC: %[[DQ:.*]] = hopper.wgmma.ss %{{.*}}, %{{.*}} k 64 boxes 0, 0 {a_mn_major, b_mn_major} : bf16 -> !hopper.frag<64x128xf32>
// ATOMIC-NEXT: %[[DQR:.*]] = hopper.wgmma.wait 0, %[[DQ]]
// ATOMIC: hopper.reduce_add %[[DQR]] to %{{.*}} : !hopper.frag<64x128xf32>
// NVVM-LABEL: gpu.module @bwd256_full_kernels
func.func @bwd256_full(%q: memref<?x1x?x256xbf16>, %k: memref<?x1x?x256xbf16>, %v: memref<?x1x?x256xbf16>,
                       %o: memref<?x1x?x256xbf16>, %do: memref<?x1x?x256xbf16>, %lse: memref<?x1x?xf32>,
                       %dq: memref<?x1x?x256xbf16>, %dk: memref<?x1x?x256xbf16>, %dv: memref<?x1x?x256xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x256xbf16>, memref<?x1x?x256xbf16>, memref<?x1x?x256xbf16>, memref<?x1x?x256xbf16>, memref<?x1x?x256xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x256xbf16>, memref<?x1x?x256xbf16>, memref<?x1x?x256xbf16>)
  return
}

// -----

// The sections are the table's at head dims 128 and 256 only (measured
// even at 64): head dim 64 causal keeps the kv block fastest.
// ORDER-LABEL: gpu.module @bwd64_causal_kernels
// ORDER: hopper.tile_coords %{{.*}} in %{{.*}}, %{{.*}} block_m 128{{$}}
func.func @bwd64_causal(%q: memref<?x1x?x64xbf16>, %k: memref<?x1x?x64xbf16>, %v: memref<?x1x?x64xbf16>,
                        %o: memref<?x1x?x64xbf16>, %do: memref<?x1x?x64xbf16>, %lse: memref<?x1x?xf32>,
                        %dq: memref<?x1x?x64xbf16>, %dk: memref<?x1x?x64xbf16>, %dv: memref<?x1x?x64xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>) causal
  return
}
