// convert-attn-to-hopper on attn.flash_attention_varlen's tiled form: the
// kernel's tiles are (m-block, q head, sequence) over the longest sequence
// (maxSeqlenQ); each role reads its sequence's rows from cu_seqlens_q/k
// (seqused_k when the launch gives it) with the shared sequence-bounds
// builder, loads Q and K/V at the sequence's rows of the packed tensors (a
// batch of one), masks by the sequence's own lengths, and stores LSE
// ([Hq, Tq]: stride Sq) and O below the sequence's end (a TMA box would
// write the next sequence's rows): with one CTA per tile by TMA where a
// warpgroup's 64 rows lie inside the sequence, else directly; a persistent
// kernel copies O out of its staging buffer itself, 16 bytes a thread (the
// branch broke its steady-state wgmma batch). With one CTA per tile both
// roles skip an m-block past its sequence's end; a persistent producer
// skips such tiles itself, claiming the next from the scheduler.
// attn-hopper-config gives a packed batch no clusters whatever the options
// say, and direct stores to head dim 64's persistent kernel of two
// consumer warpgroups (measured no faster) and to three consumer
// warpgroups without persistence; persistent, three copy O out too
// (PERSIST192).
// RUN: fa3-opt %s --attn-hopper-config="kv-multicast=on" | FileCheck %s --check-prefix=CONFIG
// RUN: sed -e 's/x128xbf16/x64xbf16/g' -e 's/) causal$/)/' %s | fa3-opt --attn-hopper-config=persistent=off | FileCheck %s --check-prefix=CONFIG192
// RUN: fa3-opt %s --attn-hopper-config=persistent=off --attn-tile --convert-attn-to-hopper --hopper-warp-specialize | FileCheck %s
// RUN: fa3-opt %s --attn-hopper-config --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=PERSIST
// RUN: sed -e 's/x128xbf16/x64xbf16/g' %s | fa3-opt --attn-hopper-config --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=PERSIST64
// RUN: sed -e 's/x128xbf16/x64xbf16/g' -e 's/) causal$/)/' %s | fa3-opt --attn-hopper-config --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=PERSIST192
// RUN: sed -e 's/x128xbf16/x64xbf16/g' -e 's/) causal$/)/' %s | fa3-opt --attn-hopper-config=persistent=off --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=TILES192
// RUN: fa3-opt %s --attn-hopper-config --attn-tile | sed -e 's/memref.load %arg4\[%arg7\]/memref.load %arg4[%1]/' | not fa3-opt --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=FORM
// The length of k's and v's views (cu_seqlens_k[s + 1] - k0) replaced by
// q's: refused.
// RUN: fa3-opt %s --attn-hopper-config --attn-tile | sed -e 's/\(memref.subview %%transpose_[49]\[0, 0, %7, 0\] \[1, 2, \)%10/\1%11/' | not fa3-opt --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=FORM
// RUN: not fa3-opt %s --attn-hopper-config --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=UNTILED
// A paged packed batch (paged-kv: flash_attn_with_kvcache's cu_seqlens_q
// over a page table): one CTA per tile, the producer's K/V loads through
// the whole table when the launch gives one (small pages copied by the
// producer warps); refused with persistent=on (and for a fixed-length
// batch: decode.mlir).
// RUN: fa3-opt %s --attn-hopper-config="paged-kv=true" | FileCheck %s --check-prefix=CONFIGPAGED
// RUN: fa3-opt %s --attn-hopper-config="paged-kv=true" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize | FileCheck %s --check-prefix=PAGED
// RUN: not fa3-opt %s --attn-hopper-config="paged-kv=true persistent=on" 2>&1 | FileCheck %s --check-prefix=PAGEDPERSIST

// CONFIG: attn.flash_attention_varlen {{.*}}attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = true>

// Head dim 64 with a full mask: 192 query rows, three consumers.
// CONFIG192: attn.hopper_config = #attn.hopper_config<block_m = 192, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = false, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = false, tma_store = false>

// UNTILED: error: 'attn.flash_attention_varlen' op convert-attn-to-hopper needs the tiled form

// The parameters (fa3rt_abi.def): %arg7 B (sequences), %arg8 Sq (Tq),
// %arg10 Hq, %arg16/17/18 cuSeqlensQ/K, seqUsedK, %arg19 maxSeqlenQ.
// CHECK: gpu.func @varlen_kernel(
// CHECK-SAME: o_store = "tma"
// CHECK-SAME: varlen = true
// The producer: the sequence of the tile, then its rows.
// CHECK: hopper.warp_specialize producer
// CHECK: hopper.tile_grid %arg19, %arg10, %arg7 block_m 128
// CHECK: %[[M0:.*]], %[[HEAD:.*]], %[[SEQ:.*]] = hopper.tile_coords {{.*}} longest_first{{$}}
// CHECK: %[[S1:.*]] = arith.addi %[[SEQ]], %{{.*}} : i32
// CHECK: %[[PQ0:.*]] = llvm.getelementptr %arg16[%[[SEQ]]]
// CHECK: %[[Q0:.*]] = llvm.load %[[PQ0]]
// CHECK: %[[PQ1:.*]] = llvm.getelementptr %arg16[%[[S1]]]
// CHECK: %[[Q1:.*]] = llvm.load %[[PQ1]]
// CHECK: %[[PK0:.*]] = llvm.getelementptr %arg17[%[[SEQ]]]
// CHECK: %[[K0:.*]] = llvm.load %[[PK0]]
// CHECK: %[[PK1:.*]] = llvm.getelementptr %arg17[%[[S1]]]
// CHECK: %[[K1:.*]] = llvm.load %[[PK1]]
// CHECK: %[[NK:.*]] = arith.subi %[[K1]], %[[K0]] : i32
// CHECK: %[[SQ:.*]] = arith.subi %[[Q1]], %[[Q0]] : i32
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr<1>
// CHECK: %[[GIVEN:.*]] = llvm.icmp "ne" %arg18, %[[NULL]]
// CHECK: %[[USED:.*]] = scf.if %[[GIVEN]] -> (i32) {
// CHECK:   llvm.getelementptr %arg18[%[[SEQ]]]
// CHECK: } else {
// CHECK:   scf.yield %[[NK]] : i32
// ... clamped to the sequence's keys (0 .. NK: no tile reads another's)
// CHECK: %[[USED0:.*]] = arith.maxsi %[[USED]], %c0_i32{{(_[0-9]+)?}} : i32
// CHECK-NEXT: %[[SKV:.*]] = arith.minsi %[[USED0]], %[[NK]] : i32
// CHECK: func.call @varlen_kernel_kv_range(%[[M0]], %[[SQ]], %[[SKV]])
// CHECK: %[[LIVE:.*]] = arith.cmpi slt, %[[M0]], %[[SQ]] : i32
// CHECK: scf.if %[[LIVE]] {
// CHECK:   %[[QROW:.*]] = arith.addi %[[Q0]], %[[M0]] : i32
// CHECK:   hopper.load_tile %arg0[%[[QROW]], %[[HEAD]], %c0_i32]
// CHECK:   scf.for
// CHECK:     %[[KVROW:.*]] = arith.addi %[[K0]], %{{.*}} : i32
// CHECK:     hopper.load_tile %arg1[%[[KVROW]], %{{.*}}, %c0_i32]
// CHECK:     hopper.load_tile %arg2[%[[KVROW]], %{{.*}}, %c0_i32]
// The consumers: the same bounds; the mask by the sequence's lengths.
// CHECK: } consumers
// CHECK: hopper.tile_grid %arg19, %arg10, %arg7 block_m 128
// (each loaded value lane 0's: warp-uniform for ptxas)
// CHECK: %[[CQ0L:.*]] = llvm.load
// CHECK: %[[CQ0:.*]] = hopper.warp_uniform %[[CQ0L]] : i32
// CHECK: arith.subi
// CHECK: %[[CSQ:.*]] = arith.subi
// CHECK: scf.if
// CHECK: arith.maxsi
// CHECK-NEXT: %[[CSKV:.*]] = arith.minsi
// CHECK: %[[CLIVE:.*]] = arith.cmpi slt, %{{.*}}, %[[CSQ]] : i32
// CHECK: scf.if %[[CLIVE]] {
// CHECK: hopper.mask {{.*}} visible @varlen_kernel_visible_cols(%[[CSQ]], %[[CSKV]])
// CHECK: %[[LROW:.*]] = arith.addi %[[CM0:.*]], %{{.*}} : i32
// CHECK: %[[ROW:.*]] = arith.addi %[[CQ0]], %[[LROW]] : i32
// CHECK: %[[END:.*]] = arith.addi %[[CQ0]], %[[CSQ]] : i32
// CHECK: %[[TROW:.*]] = arith.addi %[[CQ0]], %[[CM0]] : i32
// ... O by TMA within the sequence (its first row in the sequence and
// the sequence's length), else directly: hopper-async-copy's branch ...
// CHECK: hopper.store_o {{.*}} rows %[[ROW]] head %{{.*}} batch %c0_i32 bound %[[END]] staging %{{.*}}[163840] consumer[%{{.*}}] of 2 tma %{{.*}} tile(%[[TROW]], %{{.*}}) within(%[[LROW]], %[[CSQ]]) :
// CHECK: hopper.store_lse {{.*}} rows %[[ROW]] head %{{.*}} batch %c0_i32 heads %arg10 bound %[[END]] stride %arg8

// The persistent kernel: in Q's fill (the producer thread's, after
// hopper-warp-specialize), from each claim on the tiles past their
// sequence's end are skipped (claiming the next); the consumers take the
// tiles it publishes, all of them with work.
// PERSIST: gpu.func @varlen_kernel(
// PERSIST-SAME: grid = "persistent"
// PERSIST: } consumers
// PERSIST: hopper.ring.fill
// PERSIST: %[[CLAIM:.*]] = hopper.tile_claim %{{.*}} dynamic counter %arg6
// PERSIST-NEXT: %[[LIVE:.*]] = scf.while (%[[T:.*]] = %[[CLAIM]]) : (i32) -> i32 {
// PERSIST:   %[[IN:.*]] = arith.cmpi slt, %[[T]], %[[TILES:.*]] : i32
// PERSIST:   %[[EMPTY:.*]] = scf.if %[[IN]] -> (i1) {
// PERSIST:     %[[M0:.*]], %{{.*}}, %[[SEQ:.*]] = hopper.tile_coords %[[T]] {{.*}} longest_first{{$}}
// PERSIST:     llvm.getelementptr %arg16[%[[SEQ]]]
// PERSIST:     %[[NONE:.*]] = arith.cmpi sge, %[[M0]], %{{.*}} : i32
// PERSIST:     scf.yield %[[NONE]] : i1
// PERSIST:   } else {
// PERSIST:     scf.yield %false : i1
// PERSIST:   scf.condition(%[[EMPTY]]) %[[T]] : i32
// PERSIST: } do {
// PERSIST:   %[[N:.*]] = hopper.tile_next %{{.*}} dynamic counter %arg6
// PERSIST:   scf.yield %[[N]] : i32
// The producer publishes the tile with its sequence's bounds (q0, sq, k0,
// skv as words 4 .. 7), which the consumers read instead of cu_seqlens.
// PERSIST: hopper.ring.publish %[[LIVE]], %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^ ]*}} at
// PERSIST: hopper.load_tile %arg0
// PERSIST: hopper.ring.consumer_wait
// PERSIST: hopper.ring.published {{.*}} word 0
// PERSIST-NOT: llvm.getelementptr %arg16
// PERSIST: hopper.ring.published {{.*}} word 5
// PERSIST-NEXT: %[[PSQ:.*]] = hopper.warp_uniform
// PERSIST-NOT: llvm.getelementptr %arg16
// PERSIST: hopper.ring.published {{.*}} word 7
// PERSIST-NEXT: %[[PSKV:.*]] = hopper.warp_uniform
// PERSIST-NEXT: func.call @varlen_kernel_kv_range(%{{.*}}, %[[PSQ]], %[[PSKV]])
// PERSIST-NOT: llvm.getelementptr %arg16
// PERSIST-NOT: arith.cmpi slt, %{{.*}}, %[[PSQ]]
// PERSIST-NOT: scf.if %{{[0-9]+}} {
// PERSIST: hopper.ring.consumer_wait
// PERSIST: hopper.store_o %{{.*}} bound %{{[0-9]+}} staging %{{.*}}[196608] consumer[%{{.*}}] of 2 wait_previous : !hopper.frag
// (no bulk store to wait for at the kernel's end)
// PERSIST-NOT: nvvm.cp.async.bulk.wait_group
// PERSIST: gpu.return
// PERSIST64: o_store = "direct"
// PERSIST64: hopper.store_o %{{.*}} bound %{{[0-9]+}} : !hopper.frag<64x64xf32>
// PERSIST192: o_store = "staged"
// PERSIST192: hopper.store_o %{{.*}} bound %{{[0-9]+}} staging %{{.*}} consumer[%{{.*}}] of 3 wait_previous : !hopper.frag<64x64xf32>
// TILES192: o_store = "direct"
// TILES192: hopper.store_o %{{.*}} bound %{{[0-9]+}} : !hopper.frag<64x64xf32>

// CONFIGPAGED: attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = false, q_buffers = 1, {{.*}}, cluster_m = 1, {{.*}}, paged_kv = true>
// PAGEDPERSIST: error: cannot generate the Hopper kernel: unsupported paged-kv with persistent=on (a paged packed batch's kernel runs one CTA per tile)

// The facts say paged_kv and paged_copy; the producer loads K and V
// through the table (%arg23, its pages in order the packed rows) where the
// launch gives one, the sequence's rows ending at k0 + its keys: copied by
// the four producer warps where the launch gives the pool (%arg38, pages
// of at most 16 rows), else TMA boxes; without a table the packed tensors.
// PAGED: gpu.func @varlen_kernel(
// PAGED-SAME: paged_copy = true
// PAGED-SAME: paged_kv = true
// K's and V's full barriers count the copying warps' 128 lanes.
// PAGED: hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, {{.*}}, producers = 128>
// PAGED-NEXT: hopper.ring.create %{{.*}} : !hopper.ring<stages = 2, {{.*}}, producers = 128>
// PAGED: hopper.warp_specialize producer regs 24
// PAGED: %[[PK0:.*]] = llvm.getelementptr %arg17[
// PAGED-NEXT: %[[K0:.*]] = llvm.load %[[PK0]] : !llvm.ptr<1> -> i32
// PAGED: %[[KEND:.*]] = arith.addi %[[K0]], %{{.*}} : i32
// PAGED: scf.for
// PAGED:   %[[KVROW:.*]] = arith.addi %[[K0]], %{{.*}} : i32
// PAGED:   %[[GIVEN:.*]] = llvm.icmp "ne" %arg23, %{{.*}} : !llvm.ptr<1>
// PAGED:   scf.if %[[GIVEN]] {
// PAGED:     %[[POOL:.*]] = llvm.icmp "ne" %arg38, %{{.*}} : !llvm.ptr<1>
// PAGED-NEXT: scf.if %[[POOL]] {
// PAGED-NEXT:  hopper.copy_paged_tile %arg38[%[[KVROW]], %{{.*}}] strides %arg40, %arg41, %arg42 pages %arg23 page_size %arg25 pool %arg43 bound %[[KEND]] into %{{.*}} rows 128 cols 128 warps 4 : bf16
// PAGED-NEXT: } else {
// PAGED:     hopper.load_paged_tile %arg1[%[[KVROW]], %{{.*}}] pages %arg23 page_size %arg25 bound %[[KEND]] into
// PAGED:   } else {
// PAGED:     hopper.load_tile %arg1[%[[KVROW]], %{{.*}}, %c0_i32]
// PAGED:   hopper.load_paged_tile %arg2[%[[KVROW]], %{{.*}}] pages %arg23 page_size %arg25 bound %[[KEND]] into
// PAGED:     hopper.load_tile %arg2[%[[KVROW]], %{{.*}}, %c0_i32]
// PAGED: } consumers

// FORM: error: cannot generate the Hopper kernel: its tensors are views of a packed variable-length batch in a form the kernel does not take
func.func @varlen(%q: memref<?x8x128xbf16>, %k: memref<?x2x128xbf16>, %v: memref<?x2x128xbf16>,
                  %cq: memref<?xi32>, %ck: memref<?xi32>,
                  %o: memref<?x8x128xbf16>, %lse: memref<8x?xf32>) {
  attn.flash_attention_varlen ins(%q, %k, %v : memref<?x8x128xbf16>, memref<?x2x128xbf16>, memref<?x2x128xbf16>)
      seqlens(%cq, %ck : memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x8x128xbf16>, memref<8x?xf32>) causal
  return
}
