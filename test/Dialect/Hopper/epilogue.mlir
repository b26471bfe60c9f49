// The epilogue ops print and parse back; their verifiers refuse what the
// stores cannot write.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @epilogue
// CHECK: %[[INV:.*]], %[[LSE:.*]] = hopper.finalize_rows %{{.*}}, %{{.*}} : !hopper.frag<64xf32>
// CHECK: hopper.store_o_tma %{{.*}}, %[[INV]] to %{{.*}} tile(%{{.*}}, %{{.*}}, %{{.*}}) staging %{{.*}}[81920] consumer[%{{.*}}] of 2 wait_previous : !hopper.frag<64x128xf32> as bf16
// CHECK: hopper.store_o_tma %{{.*}}, %[[INV]] to %{{.*}} tile(%{{.*}}, %{{.*}}, %{{.*}}) staging %{{.*}}[0] consumer[%{{.*}}] of 3 drain : !hopper.frag<64x256xf32> as f16
// CHECK: hopper.store_o_tma %{{.*}}, %[[INV]] to %{{.*}} tile(%{{.*}}, %{{.*}}, %{{.*}}) staging %{{.*}}[1024] consumer[%{{.*}}] of 1 : !hopper.frag<64x64xf32> as bf16
// CHECK: hopper.store_o_direct %{{.*}}, %[[INV]] to %{{.*}} strides(%{{.*}}, %{{.*}}, %{{.*}}) rows %{{.*}} head %{{.*}} batch %{{.*}} bound %{{.*}} : !hopper.frag<64x128xf32> as bf16
// CHECK: hopper.store_o_direct %{{.*}}, %[[INV]] to %{{.*}} strides(%{{.*}}, %{{.*}}, %{{.*}}) rows %{{.*}} head %{{.*}} batch %{{.*}} bound %{{.*}} : !hopper.frag<64x24xf32> as f16
// CHECK: hopper.store_o_direct %{{.*}}, %[[INV]] to %{{.*}} strides(%{{.*}}, %{{.*}}, %{{.*}}) rows %{{.*}} head %{{.*}} batch %{{.*}} bound %{{.*}} {columns = 96 : i64} : !hopper.frag<64x128xf32> as bf16
// CHECK: hopper.store_lse %[[LSE]] to %{{.*}} rows %{{.*}} head %{{.*}} batch %{{.*}} heads %{{.*}} bound %{{.*}} : !hopper.frag<64xf32>
// GQA packing (group) and a split's partial O in f32:
// CHECK: hopper.store_o_direct %{{.*}}, %[[INV]] to %{{.*}} strides(%{{.*}}, %{{.*}}, %{{.*}}) rows %{{.*}} group %{{.*}} head %{{.*}} batch %{{.*}} bound %{{.*}} : !hopper.frag<64x128xf32> as f32
// CHECK: hopper.store_lse %[[LSE]] to %{{.*}} rows %{{.*}} group %{{.*}} head %{{.*}} batch %{{.*}} heads %{{.*}} bound %{{.*}} : !hopper.frag<64xf32>
func.func @epilogue(%m: !hopper.frag<64xf32>, %l: !hopper.frag<64xf32>,
                    %o: !hopper.frag<64x128xf32>, %o256: !hopper.frag<64x256xf32>,
                    %o64: !hopper.frag<64x64xf32>, %o24: !hopper.frag<64x24xf32>,
                    %LSE: !llvm.ptr<1>, %O: !llvm.ptr<1>, %map: !llvm.ptr,
                    %smem: !llvm.ptr<3>, %row0: i32, %m0: i32, %h: i32, %b: i32,
                    %Hq: i32, %Sq: i32, %cw: i32, %sB: i64, %sS: i64, %sH: i64) {
  %inv, %lse = hopper.finalize_rows %m, %l : !hopper.frag<64xf32>
  hopper.store_o_tma %o, %inv to %map tile(%m0, %h, %b) staging %smem[81920]
      consumer[%cw] of 2 wait_previous : !hopper.frag<64x128xf32> as bf16
  hopper.store_o_tma %o256, %inv to %map tile(%m0, %h, %b) staging %smem[0]
      consumer[%cw] of 3 drain : !hopper.frag<64x256xf32> as f16
  hopper.store_o_tma %o64, %inv to %map tile(%m0, %h, %b) staging %smem[1024]
      consumer[%cw] of 1 : !hopper.frag<64x64xf32> as bf16
  hopper.store_o_direct %o, %inv to %O strides(%sB, %sS, %sH) rows %row0 head %h
      batch %b bound %Sq : !hopper.frag<64x128xf32> as bf16
  hopper.store_o_direct %o24, %inv to %O strides(%sB, %sS, %sH) rows %row0 head %h
      batch %b bound %Sq : !hopper.frag<64x24xf32> as f16
  hopper.store_o_direct %o, %inv to %O strides(%sB, %sS, %sH) rows %row0 head %h
      batch %b bound %Sq {columns = 96} : !hopper.frag<64x128xf32> as bf16
  hopper.store_lse %lse to %LSE rows %row0 head %h batch %b heads %Hq bound %Sq
      : !hopper.frag<64xf32>
  hopper.store_o_direct %o, %inv to %O strides(%sB, %sS, %sH) rows %row0 group %cw
      head %h batch %b bound %Sq : !hopper.frag<64x128xf32> as f32
  hopper.store_lse %lse to %LSE rows %row0 group %cw head %h batch %b heads %Hq
      bound %Sq : !hopper.frag<64xf32>
  return
}

// -----

func.func @finalize_tile(%m: !hopper.frag<64x64xf32>, %l: !hopper.frag<64x64xf32>) {
  // expected-error @below {{operand #0 must be a row vector fragment (64 x f32), but got '!hopper.frag<64x64xf32>'}}
  %inv, %lse = hopper.finalize_rows %m, %l : !hopper.frag<64x64xf32>
  return
}

// -----

func.func @lse_shared(%lse: !hopper.frag<64xf32>, %p: !llvm.ptr<3>, %i: i32) {
  // expected-error @below {{operand #1 must be a global-memory pointer (!llvm.ptr<1>), but got '!llvm.ptr<3>'}}
  "hopper.store_lse"(%lse, %p, %i, %i, %i, %i, %i)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 1, 1, 1, 1, 0>}>
      : (!hopper.frag<64xf32>, !llvm.ptr<3>, i32, i32, i32, i32, i32) -> ()
  return
}

// -----

func.func @direct_columns_wider(%o: !hopper.frag<64x64xf32>, %inv: !hopper.frag<64xf32>,
                                 %p: !llvm.ptr<1>, %i: i32, %s: i64) {
  // expected-error @below {{columns must be a positive multiple of 8 up to O's width 64, got 72}}
  hopper.store_o_direct %o, %inv to %p strides(%s, %s, %s) rows %i head %i batch %i
      bound %i {columns = 72} : !hopper.frag<64x64xf32> as bf16
  return
}

// -----

func.func @direct_columns_negative(%o: !hopper.frag<64x64xf32>, %inv: !hopper.frag<64xf32>,
                                   %p: !llvm.ptr<1>, %i: i32, %s: i64) {
  // expected-error @below {{columns must be a positive multiple of 8 up to O's width 64, got -8}}
  hopper.store_o_direct %o, %inv to %p strides(%s, %s, %s) rows %i head %i batch %i
      bound %i {columns = -8} : !hopper.frag<64x64xf32> as bf16
  return
}

// -----

func.func @direct_columns_partial(%o: !hopper.frag<64x64xf32>, %inv: !hopper.frag<64xf32>,
                                  %p: !llvm.ptr<1>, %i: i32, %s: i64) {
  // expected-error @below {{columns must be a positive multiple of 8 up to O's width 64, got 36}}
  hopper.store_o_direct %o, %inv to %p strides(%s, %s, %s) rows %i head %i batch %i
      bound %i {columns = 36} : !hopper.frag<64x64xf32> as bf16
  return
}

// -----

func.func @direct_bf16(%o: !hopper.frag<64x64xbf16>, %inv: !hopper.frag<64xf32>,
                       %p: !llvm.ptr<1>, %i: i32, %s: i64) {
  // expected-error @below {{O must be an f32 fragment (the accumulator), got '!hopper.frag<64x64xbf16>'}}
  hopper.store_o_direct %o, %inv to %p strides(%s, %s, %s) rows %i head %i batch %i
      bound %i : !hopper.frag<64x64xbf16> as bf16
  return
}

// -----

func.func @direct_i16(%o: !hopper.frag<64x64xf32>, %inv: !hopper.frag<64xf32>,
                      %p: !llvm.ptr<1>, %i: i32, %s: i64) {
  // expected-error @below {{O is stored as bf16, f16 or f32 (a split's partial O, unrounded), not 'i16'}}
  hopper.store_o_direct %o, %inv to %p strides(%s, %s, %s) rows %i head %i batch %i
      bound %i : !hopper.frag<64x64xf32> as i16
  return
}

// -----

func.func @tma_bf16(%o: !hopper.frag<64x64xbf16>, %inv: !hopper.frag<64xf32>,
                    %map: !llvm.ptr, %smem: !llvm.ptr<3>, %i: i32) {
  // expected-error @below {{O must be an f32 fragment (the accumulator), got '!hopper.frag<64x64xbf16>'}}
  hopper.store_o_tma %o, %inv to %map tile(%i, %i, %i) staging %smem[0]
      consumer[%i] of 2 : !hopper.frag<64x64xbf16> as bf16
  return
}

// -----

func.func @tma_f32(%o: !hopper.frag<64x64xf32>, %inv: !hopper.frag<64xf32>,
                   %map: !llvm.ptr, %smem: !llvm.ptr<3>, %i: i32) {
  // expected-error @below {{O is stored as bf16 or f16, not 'f32'}}
  hopper.store_o_tma %o, %inv to %map tile(%i, %i, %i) staging %smem[0]
      consumer[%i] of 2 : !hopper.frag<64x64xf32> as f32
  return
}

// -----

func.func @tma_width(%o: !hopper.frag<64x24xf32>, %inv: !hopper.frag<64xf32>,
                     %map: !llvm.ptr, %smem: !llvm.ptr<3>, %i: i32) {
  // expected-error @below {{stmatrix stages O in pairs of 8-column blocks: O's width must be a multiple of 16, got 24}}
  hopper.store_o_tma %o, %inv to %map tile(%i, %i, %i) staging %smem[0]
      consumer[%i] of 2 : !hopper.frag<64x24xf32> as bf16
  return
}

// -----

func.func @tma_align(%o: !hopper.frag<64x64xf32>, %inv: !hopper.frag<64xf32>,
                     %map: !llvm.ptr, %smem: !llvm.ptr<3>, %i: i32) {
  // expected-error @below {{the staging buffer must start on a 1024-byte boundary (128B swizzle atoms), got offset 512}}
  hopper.store_o_tma %o, %inv to %map tile(%i, %i, %i) staging %smem[512]
      consumer[%i] of 2 : !hopper.frag<64x64xf32> as bf16
  return
}

// -----

func.func @tma_bounds(%o: !hopper.frag<64x256xf32>, %inv: !hopper.frag<64xf32>,
                      %map: !llvm.ptr, %smem: !llvm.ptr<3>, %i: i32) {
  // expected-error @below {{the staging buffer (65536 bytes at offset 196608) must lie within the 232448 bytes of a CTA's shared memory}}
  hopper.store_o_tma %o, %inv to %map tile(%i, %i, %i) staging %smem[196608]
      consumer[%i] of 2 : !hopper.frag<64x256xf32> as bf16
  return
}

// -----

func.func @tma_consumer(%o: !hopper.frag<64x64xf32>, %inv: !hopper.frag<64xf32>,
                        %map: !llvm.ptr, %smem: !llvm.ptr<3>, %i: i32) {
  %c2 = arith.constant 2 : i32
  // expected-error @below {{consumer 2 is not one of the 2 consumer warpgroups}}
  hopper.store_o_tma %o, %inv to %map tile(%i, %i, %i) staging %smem[0]
      consumer[%c2] of 2 : !hopper.frag<64x64xf32> as bf16
  return
}

// -----

func.func @tma_consumers(%o: !hopper.frag<64x64xf32>, %inv: !hopper.frag<64xf32>,
                         %map: !llvm.ptr, %smem: !llvm.ptr<3>, %i: i32) {
  // expected-error @below {{attribute 'consumers' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1 whose maximum value is 3}}
  hopper.store_o_tma %o, %inv to %map tile(%i, %i, %i) staging %smem[0]
      consumer[%i] of 4 : !hopper.frag<64x64xf32> as bf16
  return
}

// -----

// hopper.store_o: the direct store's and, with staging, the staged
// store's rules, and the clauses that only mean something together;
// hopper.store_o_staged.
// CHECK-LABEL: func.func @store_o
// CHECK: hopper.store_o %{{.*}}, %{{.*}} to %{{.*}} strides(%{{.*}}, %{{.*}}, %{{.*}}) rows %{{.*}} head %{{.*}} batch %{{.*}} bound %{{.*}} : !hopper.frag<64x128xf32> as f32
// CHECK: hopper.store_o %{{.*}}, %{{.*}} to %{{.*}} strides(%{{.*}}, %{{.*}}, %{{.*}}) rows %{{.*}} head %{{.*}} batch %{{.*}} bound %{{.*}} staging %{{.*}}[1024] consumer[%{{.*}}] of 2 wait_previous : !hopper.frag<64x128xf32> as bf16
// CHECK: hopper.store_o %{{.*}}, %{{.*}} to %{{.*}} strides(%{{.*}}, %{{.*}}, %{{.*}}) rows %{{.*}} head %{{.*}} batch %{{.*}} bound %{{.*}} staging %{{.*}}[1024] consumer[%{{.*}}] of 2 tma %{{.*}} tile(%{{.*}}, %{{.*}}) within(%{{.*}}, %{{.*}}) drain : !hopper.frag<64x128xf32> as bf16
// CHECK: hopper.store_o_staged %{{.*}}, %{{.*}} to %{{.*}} strides(%{{.*}}, %{{.*}}, %{{.*}}) rows %{{.*}} group %{{.*}} head %{{.*}} batch %{{.*}} bound %{{.*}} staging %{{.*}}[0] consumer[%{{.*}}] of 2 wait_previous {columns = 96 : i64} : !hopper.frag<64x128xf32> as f16
// CHECK: hopper.store_o_staged {{.*}} staging %{{.*}}[0] consumer[%{{.*}}] of 2 drain : !hopper.frag<64x128xf32> as bf16
func.func @store_o(%o: !hopper.frag<64x128xf32>, %inv: !hopper.frag<64xf32>,
                   %O: !llvm.ptr<1>, %map: !llvm.ptr, %smem: !llvm.ptr<3>,
                   %i: i32, %s: i64) {
  hopper.store_o %o, %inv to %O strides(%s, %s, %s) rows %i head %i batch %i
      bound %i : !hopper.frag<64x128xf32> as f32
  hopper.store_o %o, %inv to %O strides(%s, %s, %s) rows %i head %i batch %i
      bound %i staging %smem[1024] consumer[%i] of 2 wait_previous
      : !hopper.frag<64x128xf32> as bf16
  hopper.store_o %o, %inv to %O strides(%s, %s, %s) rows %i head %i batch %i
      bound %i staging %smem[1024] consumer[%i] of 2 tma %map tile(%i, %i)
      within(%i, %i) drain : !hopper.frag<64x128xf32> as bf16
  hopper.store_o_staged %o, %inv to %O strides(%s, %s, %s) rows %i group %i head %i
      batch %i bound %i staging %smem[0] consumer[%i] of 2 wait_previous
      {columns = 96} : !hopper.frag<64x128xf32> as f16
  hopper.store_o_staged %o, %inv to %O strides(%s, %s, %s) rows %i head %i
      batch %i bound %i staging %smem[0] consumer[%i] of 2 drain
      : !hopper.frag<64x128xf32> as bf16
  return
}

// -----

func.func @store_o_tma_f32(%o: !hopper.frag<64x128xf32>, %inv: !hopper.frag<64xf32>,
                           %O: !llvm.ptr<1>, %map: !llvm.ptr, %smem: !llvm.ptr<3>,
                           %i: i32, %s: i64) {
  // expected-error @below {{O is stored as bf16 or f16, not 'f32'}}
  hopper.store_o %o, %inv to %O strides(%s, %s, %s) rows %i head %i batch %i
      bound %i staging %smem[0] consumer[%i] of 2 tma %map tile(%i, %i)
      : !hopper.frag<64x128xf32> as f32
  return
}

// -----

func.func @store_o_staging(%o: !hopper.frag<64x128xf32>, %inv: !hopper.frag<64xf32>,
                           %O: !llvm.ptr<1>, %smem: !llvm.ptr<3>, %i: i32, %s: i64) {
  // expected-error @below {{the staging buffer must start on a 1024-byte boundary (128B swizzle atoms), got offset 512}}
  hopper.store_o %o, %inv to %O strides(%s, %s, %s) rows %i head %i batch %i
      bound %i staging %smem[512] consumer[%i] of 2 : !hopper.frag<64x128xf32> as bf16
  return
}

// -----

func.func @store_o_columns(%o: !hopper.frag<64x128xf32>, %inv: !hopper.frag<64xf32>,
                           %O: !llvm.ptr<1>, %i: i32, %s: i64) {
  // expected-error @below {{columns must be a positive multiple of 8 up to O's width 128, got 130}}
  hopper.store_o %o, %inv to %O strides(%s, %s, %s) rows %i head %i batch %i
      bound %i {columns = 130} : !hopper.frag<64x128xf32> as bf16
  return
}

// -----

func.func @store_o_within(%o: !hopper.frag<64x128xf32>, %inv: !hopper.frag<64xf32>,
                          %O: !llvm.ptr<1>, %smem: !llvm.ptr<3>, %i: i32, %s: i64) {
  // expected-error @below {{within bounds the TMA store: it needs tma}}
  hopper.store_o %o, %inv to %O strides(%s, %s, %s) rows %i head %i batch %i
      bound %i staging %smem[0] consumer[%i] of 2 within(%i, %i)
      : !hopper.frag<64x128xf32> as bf16
  return
}

// -----

func.func @store_o_drain(%o: !hopper.frag<64x128xf32>, %inv: !hopper.frag<64xf32>,
                         %O: !llvm.ptr<1>, %i: i32, %s: i64) {
  // expected-error @below {{wait_previous and drain are for the staging buffer: they need staging}}
  hopper.store_o %o, %inv to %O strides(%s, %s, %s) rows %i head %i batch %i
      bound %i drain : !hopper.frag<64x128xf32> as bf16
  return
}

// -----

func.func @store_o_group_tma(%o: !hopper.frag<64x128xf32>, %inv: !hopper.frag<64xf32>,
                             %O: !llvm.ptr<1>, %map: !llvm.ptr, %smem: !llvm.ptr<3>,
                             %i: i32, %s: i64) {
  // expected-error @below {{group (GQA-packed rows) cannot go with tma: the TMA store's box is the tile's rows}}
  hopper.store_o %o, %inv to %O strides(%s, %s, %s) rows %i group %i head %i batch %i
      bound %i staging %smem[0] consumer[%i] of 2 tma %map tile(%i, %i)
      : !hopper.frag<64x128xf32> as bf16
  return
}

// -----

func.func @store_o_flags(%o: !hopper.frag<64x128xf32>, %inv: !hopper.frag<64xf32>,
                         %O: !llvm.ptr<1>, %i: i32, %s: i64) {
  // expected-error @below {{wait_previous and drain are for the staging buffer: they need staging}}
  hopper.store_o %o, %inv to %O strides(%s, %s, %s) rows %i head %i batch %i
      bound %i wait_previous : !hopper.frag<64x128xf32> as bf16
  return
}

// -----

// The generic form can give tma without staging, or part of a clause.
func.func @store_o_tma_alone(%o: !hopper.frag<64x128xf32>, %inv: !hopper.frag<64xf32>,
                             %O: !llvm.ptr<1>, %map: !llvm.ptr, %i: i32, %s: i64) {
  // expected-error @below {{tma stores the staged boxes: it needs staging}}
  "hopper.store_o"(%o, %inv, %O, %s, %s, %s, %i, %i, %i, %i, %map, %i, %i)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0>,
        out_type = bf16}> : (!hopper.frag<64x128xf32>, !hopper.frag<64xf32>, !llvm.ptr<1>,
        i64, i64, i64, i32, i32, i32, i32, !llvm.ptr, i32, i32) -> ()
  return
}

// -----

func.func @store_o_part(%o: !hopper.frag<64x128xf32>, %inv: !hopper.frag<64xf32>,
                        %O: !llvm.ptr<1>, %smem: !llvm.ptr<3>, %i: i32, %s: i64) {
  // expected-error @below {{staging needs all of the buffer, its offset, the consumer and the consumers}}
  "hopper.store_o"(%o, %inv, %O, %s, %s, %s, %i, %i, %i, %i, %smem)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0>,
        out_type = bf16}> : (!hopper.frag<64x128xf32>, !hopper.frag<64xf32>, !llvm.ptr<1>,
        i64, i64, i64, i32, i32, i32, i32, !llvm.ptr<3>) -> ()
  return
}

// -----

func.func @staged_columns(%o: !hopper.frag<64x128xf32>, %inv: !hopper.frag<64xf32>,
                          %O: !llvm.ptr<1>, %smem: !llvm.ptr<3>, %i: i32, %s: i64) {
  // expected-error @below {{columns must be a positive multiple of 8 up to O's width 128, got 100}}
  hopper.store_o_staged %o, %inv to %O strides(%s, %s, %s) rows %i head %i batch %i
      bound %i staging %smem[0] consumer[%i] of 2 {columns = 100}
      : !hopper.frag<64x128xf32> as bf16
  return
}

// -----

func.func @staged_consumer(%o: !hopper.frag<64x128xf32>, %inv: !hopper.frag<64xf32>,
                           %O: !llvm.ptr<1>, %smem: !llvm.ptr<3>, %i: i32, %s: i64) {
  %c3 = arith.constant 3 : i32
  // expected-error @below {{consumer 3 is not one of the 2 consumer warpgroups}}
  hopper.store_o_staged %o, %inv to %O strides(%s, %s, %s) rows %i head %i batch %i
      bound %i staging %smem[0] consumer[%c3] of 2 : !hopper.frag<64x128xf32> as bf16
  return
}
