// hopper.load_tile (a tile of a tensor as the payload of a ring slot) and
// hopper-async-copy, which writes its transfer: the commit of the tile's
// bytes on the slot's full barrier, then one TMA box per 64 columns (a
// 128-byte swizzle row of bf16/f16), box c at byte c * rows * 128 of the
// stage; in a ring shared by a 2-CTA cluster each CTA loads the boxes of
// its rank, multicast into both CTAs' rings. The verifier refuses tiles
// the boxes or the stage cannot hold.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=ROUND
// RUN: fa3-opt %s --split-input-file --verify-diagnostics --hopper-async-copy | FileCheck %s

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536, full = 229408, empty = 229440, arrivals = 264, cluster = 2>
!q = !hopper.ring<stages = 1, stage_bytes = 24576, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>

// ROUND-LABEL: func.func @tiles
// ROUND: hopper.load_tile %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] into %{{.*}}[%{{.*}}] rows 64 cols 192 : f16, !hopper.ring<stages = 1,
// ROUND: hopper.load_tile %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] into %{{.*}}[%{{.*}}] rows 64 cols 256 : bf16, !hopper.ring<stages = 2,

// CHECK-LABEL: func.func @tiles(
// CHECK-SAME: %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[MAP:[^:]*]]: !llvm.ptr, %[[U:[^:]*]]: i32, %[[ROW:[^:]*]]: i32, %[[HEAD:[^:]*]]: i32, %[[B:[^:]*]]: i32)
// ... the constants at the top, the one that was there reused ...
// CHECK-DAG: %[[C8192:.*]] = arith.constant 8192 : i32
// CHECK-DAG: %[[C16384:.*]] = arith.constant 16384 : i32
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i32
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : i32
// CHECK-DAG: %[[C128:.*]] = arith.constant 128 : i32
// CHECK-NOT: arith.constant 8192
// CHECK: %[[Q:.*]] = hopper.ring.create
// CHECK: %[[K:.*]] = hopper.ring.create
// ... a 64 x 192 tile in one CTA's ring: three boxes of 64 rows x 64
// columns (8192 bytes each), 64 x 192 x 2 bytes committed ...
// CHECK: hopper.ring.producer_acquire %[[Q]][%[[U]]]
// CHECK-NEXT: hopper.ring.producer_commit %[[Q]][%[[U]]] tx 24576
// CHECK-NEXT: hopper.tma_load %[[MAP]][%[[C0]], %[[HEAD]], %[[ROW]], %[[B]]] into %[[Q]][%[[U]]] at %[[C0]] :
// CHECK-NEXT: hopper.tma_load %[[MAP]][%[[C64]], %[[HEAD]], %[[ROW]], %[[B]]] into %[[Q]][%[[U]]] at %[[C8192]] :
// CHECK-NEXT: hopper.tma_load %[[MAP]][%[[C128]], %[[HEAD]], %[[ROW]], %[[B]]] into %[[Q]][%[[U]]] at %[[C16384]] :
// ... a 64 x 256 tile in a cluster's ring: this CTA loads boxes rank and
// rank + 2 of the four, multicast to both CTAs; the whole tile committed ...
// CHECK: hopper.ring.producer_acquire %[[K]][%[[U]]]
// CHECK-NEXT: hopper.ring.producer_commit %[[K]][%[[U]]] tx 32768
// CHECK-NEXT: %[[RANK:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "mov.u32 $0, %cluster_ctarank;", "=r"
// CHECK-NEXT: %[[B0:.*]] = arith.addi %[[RANK]], %[[C0]]
// CHECK-NEXT: %[[OFF0:.*]] = arith.muli %[[B0]], %[[C8192]]
// CHECK-NEXT: %[[COL0:.*]] = arith.muli %[[B0]], %[[C64]]
// CHECK-NEXT: hopper.tma_load %[[MAP]][%[[COL0]], %[[HEAD]], %[[ROW]], %[[B]]] into %[[K]][%[[U]]] at %[[OFF0]] multicast 3
// CHECK-NEXT: %[[B1:.*]] = arith.addi %[[RANK]], %[[C2]]
// CHECK-NEXT: %[[OFF1:.*]] = arith.muli %[[B1]], %[[C8192]]
// CHECK-NEXT: %[[COL1:.*]] = arith.muli %[[B1]], %[[C64]]
// CHECK-NEXT: hopper.tma_load %[[MAP]][%[[COL1]], %[[HEAD]], %[[ROW]], %[[B]]] into %[[K]][%[[U]]] at %[[OFF1]] multicast 3
// CHECK-NOT: hopper.load_tile
func.func @tiles(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %row: i32, %head: i32, %b: i32) -> i32 {
  %c8192 = arith.constant 8192 : i32
  %q = hopper.ring.create %smem : !q
  %k = hopper.ring.create %smem : !k
  hopper.ring.producer_acquire %q[%u] : !q
  hopper.load_tile %map[%row, %head, %b] into %q[%u] rows 64 cols 192 : f16, !q
  hopper.ring.producer_acquire %k[%u] : !k
  hopper.load_tile %map[%row, %head, %b] into %k[%u] rows 64 cols 256 : bf16, !k
  return %c8192 : i32
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>
func.func @cols(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %x: i32) {
  %q = hopper.ring.create %smem : !q
  // expected-error @below {{cols must be a multiple of 64 (one 128-byte swizzle row of 'bf16' per TMA box), got 100}}
  hopper.load_tile %map[%x, %x, %x] into %q[%x] rows 64 cols 100 : bf16, !q
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>
func.func @stage(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %x: i32) {
  %q = hopper.ring.create %smem : !q
  // expected-error @below {{a 128x128 tile (32768 bytes) does not fit the ring's 16384-byte stages}}
  hopper.load_tile %map[%x, %x, %x] into %q[%x] rows 128 cols 128 : bf16, !q
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 65536, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>
func.func @rows(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %x: i32) {
  %q = hopper.ring.create %smem : !q
  // expected-error @below {{rows must be at most 256 (a TMA box dimension), got 512}}
  hopper.load_tile %map[%x, %x, %x] into %q[%x] rows 512 cols 64 : bf16, !q
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 49152, data = 65536, full = 229408, empty = 229440, arrivals = 264, cluster = 2>
func.func @odd_boxes(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %x: i32) {
  %k = hopper.ring.create %smem : !k
  // expected-error @below {{a ring shared by a 2-CTA cluster takes tiles of an even number of boxes (each CTA loads half), got 3}}
  hopper.load_tile %map[%x, %x, %x] into %k[%x] rows 128 cols 192 : bf16, !k
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>
func.func @element(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %x: i32) {
  %q = hopper.ring.create %smem : !q
  // expected-error @below {{attribute 'element' failed to satisfy constraint}}
  hopper.load_tile %map[%x, %x, %x] into %q[%x] rows 64 cols 64 : f32, !q
  return
}

// -----

!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>
func.func @rows_atom(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %x: i32) {
  %q = hopper.ring.create %smem : !q
  // expected-error @below {{rows must be a multiple of 8 (a 128B-swizzle atom is 8 rows), got 60}}
  hopper.load_tile %map[%x, %x, %x] into %q[%x] rows 60 cols 64 : bf16, !q
  return
}

// -----

// Columns whose bytes alone exceed the stage are refused before any product
// that could wrap around.
!q = !hopper.ring<stages = 1, stage_bytes = 16384, data = 0, full = 229376, empty = 229392, arrivals = 256, cluster = 1>
func.func @huge_cols(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %x: i32) {
  %q = hopper.ring.create %smem : !q
  // expected-error @below {{does not fit the ring's 16384-byte stages}}
  hopper.load_tile %map[%x, %x, %x] into %q[%x] rows 256 cols 144115188075855872 : bf16, !q
  return
}

// -----

// A paged tile (a paged KV cache): the commit of the whole tile, then per
// chunk of min(page_size, 128) rows the page of its first row (rows past
// the bound take the last row's page) from the table, and the chunk's two
// boxes at (column, head, row in page, page), chunk rows x 128 bytes
// further into each box.
!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536, full = 229408, empty = 229440, arrivals = 256, cluster = 1>
// ROUND-LABEL: func.func @paged
// ROUND: hopper.load_paged_tile %{{.*}}[%{{.*}}, %{{.*}}] pages %{{.*}} page_size %{{.*}} bound %{{.*}} into %{{.*}}[%{{.*}}] rows 128 cols 128 : bf16
// CHECK-LABEL: func.func @paged(
// CHECK-SAME: %[[MAP:[^:]*]]: !llvm.ptr, %[[U:[^:]*]]: i32, %[[ROW:[^:]*]]: i32, %[[HEAD:[^:]*]]: i32, %[[PAGES:[^:]*]]: !llvm.ptr<1>, %[[PS:[^:]*]]: i32, %[[LEN:[^:]*]]: i32)
// CHECK: hopper.ring.producer_commit %[[K:.*]][%[[U]]] tx 32768
// CHECK: %[[CHUNK:.*]] = arith.minui %[[PS]], %c128_i32 : i32
// CHECK: %[[N:.*]] = arith.divui %c128_i32, %[[CHUNK]] : i32
// CHECK: scf.for %[[I:.*]] = %c0_i32 to %[[N]] step %c1_i32
// CHECK: %[[FIRST:.*]] = arith.muli %[[I]], %[[CHUNK]] : i32
// CHECK: %[[R:.*]] = arith.addi %[[ROW]], %[[FIRST]] : i32
// CHECK: %[[LAST:.*]] = arith.subi %[[LEN]], %c1_i32 : i32
// CHECK: %[[RC:.*]] = arith.minui %[[R]], %[[LAST]] : i32
// CHECK: %[[E:.*]] = arith.divui %[[RC]], %[[PS]] : i32
// CHECK: %[[EP:.*]] = llvm.getelementptr %[[PAGES]][%[[E]]] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
// CHECK: %[[PAGE:.*]] = llvm.load %[[EP]] : !llvm.ptr<1> -> i32
// CHECK: %[[IN:.*]] = arith.remui %[[R]], %[[PS]] : i32
// CHECK: %[[OFF:.*]] = arith.muli %[[FIRST]], %c128_i32 : i32
// CHECK: %[[O0:.*]] = arith.addi %c0_i32, %[[OFF]] : i32
// CHECK: hopper.tma_load %[[MAP]][%c0_i32, %[[HEAD]], %[[IN]], %[[PAGE]]] into %[[K]][%[[U]]] at %[[O0]] :
// CHECK: %[[O1:.*]] = arith.addi %c16384_i32, %[[OFF]] : i32
// CHECK: hopper.tma_load %[[MAP]][%c64_i32, %[[HEAD]], %[[IN]], %[[PAGE]]] into %[[K]][%[[U]]] at %[[O1]] :
// CHECK-NOT: hopper.load_paged_tile
func.func @paged(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %u: i32, %row: i32, %head: i32,
                 %pages: !llvm.ptr<1>, %ps: i32, %len: i32) {
  %k = hopper.ring.create %smem : !k
  hopper.ring.producer_acquire %k[%u] : !k
  hopper.load_paged_tile %map[%row, %head] pages %pages page_size %ps bound %len
      into %k[%u] rows 128 cols 128 : bf16, !k
  return
}

// -----

!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536, full = 229408, empty = 229440, arrivals = 264, cluster = 2>
func.func @paged_cluster(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %x: i32, %pages: !llvm.ptr<1>) {
  %k = hopper.ring.create %smem : !k
  // expected-error @below {{a paged tile loads into a ring of one CTA (cluster = 1), got cluster 2}}
  hopper.load_paged_tile %map[%x, %x] pages %pages page_size %x bound %x
      into %k[%x] rows 128 cols 128 : bf16, !k
  return
}

// -----

// A ring whose other fills are copied by 128 lanes, each an arrival: the
// thread that issues a tile's boxes arrives for all of them.
!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 65536, full = 229408, empty = 229440, arrivals = 256, cluster = 1, producers = 128>
// CHECK-LABEL: func.func @lane_producers(
// CHECK: hopper.ring.producer_commit %{{.*}}[%{{.*}}] tx 32768 count 128 :
// CHECK: hopper.tma_load
// CHECK: hopper.ring.producer_commit %{{.*}}[%{{.*}}] tx 32768 count 128 :
// CHECK: hopper.tma_load
func.func @lane_producers(%smem: !llvm.ptr<3>, %map: !llvm.ptr, %x: i32, %pages: !llvm.ptr<1>) {
  %k = hopper.ring.create %smem : !k
  hopper.load_paged_tile %map[%x, %x] pages %pages page_size %x bound %x
      into %k[%x] rows 128 cols 128 : bf16, !k
  hopper.load_tile %map[%x, %x, %x] into %k[%x] rows 128 cols 128 : bf16, !k
  return
}

// -----

// hopper.store_o (a warpgroup's O rows and where they go): without
// staging the direct store; staged without tma the threads' copy-out;
// staged with tma the TMA store and its flags; with within (a packed
// batch) the TMA store where the warpgroup's 64 rows lie inside the
// sequence (first row + 64 <= length), else the direct store.
// CHECK-LABEL: func.func @stores(
// CHECK-SAME: %[[O:[^:]*]]: !hopper.frag<64x128xf32>, %[[INV:[^:]*]]: !hopper.frag<64xf32>, %[[PTR:[^:]*]]: !llvm.ptr<1>, %[[MAP:[^:]*]]: !llvm.ptr, %[[SMEM:[^:]*]]: !llvm.ptr<3>, %[[ROW:[^:]*]]: i32, %[[H:[^:]*]]: i32, %[[B:[^:]*]]: i32, %[[BOUND:[^:]*]]: i32, %[[CW:[^:]*]]: i32, %[[LROW:[^:]*]]: i32, %[[LEN:[^:]*]]: i32, %[[S:[^:]*]]: i64)
// CHECK: %[[C64:.*]] = arith.constant 64 : i32
// CHECK: hopper.store_o_direct %[[O]], %[[INV]] to %[[PTR]] strides(%[[S]], %[[S]], %[[S]]) rows %[[ROW]] group %[[CW]] head %[[H]] batch %[[B]] bound %[[BOUND]] {columns = 96 : i64} : !hopper.frag<64x128xf32> as bf16
// CHECK-NEXT: hopper.store_o_staged %[[O]], %[[INV]] to %[[PTR]] strides(%[[S]], %[[S]], %[[S]]) rows %[[ROW]] head %[[H]] batch %[[B]] bound %[[BOUND]] staging %[[SMEM]][81920] consumer[%[[CW]]] of 2 wait_previous : !hopper.frag<64x128xf32> as bf16
// CHECK-NEXT: hopper.store_o_staged %[[O]], %[[INV]] to %[[PTR]] strides(%[[S]], %[[S]], %[[S]]) rows %[[ROW]] group %[[CW]] head %[[H]] batch %[[B]] bound %[[BOUND]] staging %[[SMEM]][0] consumer[%[[CW]]] of 2 drain : !hopper.frag<64x128xf32> as bf16
// CHECK-NEXT: hopper.store_o_tma %[[O]], %[[INV]] to %[[MAP]] tile(%[[ROW]], %[[LROW]], %[[B]]) staging %[[SMEM]][81920] consumer[%[[CW]]] of 2 wait_previous : !hopper.frag<64x128xf32> as bf16
// CHECK-NEXT: %[[END:.*]] = arith.addi %[[LROW]], %[[C64]] : i32
// CHECK-NEXT: %[[INSIDE:.*]] = arith.cmpi sle, %[[END]], %[[LEN]] : i32
// CHECK-NEXT: scf.if %[[INSIDE]] {
// CHECK-NEXT:   hopper.store_o_tma %[[O]], %[[INV]] to %[[MAP]] tile(%[[ROW]], %[[H]], %[[B]]) staging %[[SMEM]][0] consumer[%[[CW]]] of 2 drain : !hopper.frag<64x128xf32> as f16
// CHECK-NEXT: } else {
// CHECK-NEXT:   hopper.store_o_direct %[[O]], %[[INV]] to %[[PTR]] strides(%[[S]], %[[S]], %[[S]]) rows %[[ROW]] head %[[H]] batch %[[B]] bound %[[BOUND]] : !hopper.frag<64x128xf32> as f16
// CHECK-NEXT: }
// CHECK-NOT: hopper.store_o 
func.func @stores(%o: !hopper.frag<64x128xf32>, %inv: !hopper.frag<64xf32>,
                  %ptr: !llvm.ptr<1>, %map: !llvm.ptr, %smem: !llvm.ptr<3>,
                  %row: i32, %h: i32, %b: i32, %bound: i32, %cw: i32,
                  %lrow: i32, %len: i32, %s: i64) {
  hopper.store_o %o, %inv to %ptr strides(%s, %s, %s) rows %row group %cw head %h
      batch %b bound %bound {columns = 96} : !hopper.frag<64x128xf32> as bf16
  hopper.store_o %o, %inv to %ptr strides(%s, %s, %s) rows %row head %h batch %b
      bound %bound staging %smem[81920] consumer[%cw] of 2 wait_previous
      : !hopper.frag<64x128xf32> as bf16
  hopper.store_o %o, %inv to %ptr strides(%s, %s, %s) rows %row group %cw head %h batch %b
      bound %bound staging %smem[0] consumer[%cw] of 2 drain
      : !hopper.frag<64x128xf32> as bf16
  hopper.store_o %o, %inv to %ptr strides(%s, %s, %s) rows %row head %h batch %b
      bound %bound staging %smem[81920] consumer[%cw] of 2 tma %map tile(%row, %lrow)
      wait_previous : !hopper.frag<64x128xf32> as bf16
  hopper.store_o %o, %inv to %ptr strides(%s, %s, %s) rows %row head %h batch %b
      bound %bound staging %smem[0] consumer[%cw] of 2 tma %map tile(%row, %h)
      within(%lrow, %len) drain : !hopper.frag<64x128xf32> as f16
  return
}
