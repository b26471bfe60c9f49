// Register fragments and the math on them print and parse back; their
// verifiers refuse shapes, element types and states the kernel cannot use.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @mainloop_step
// CHECK: %[[S:.*]] = hopper.wgmma.ss %{{.*}}, %{{.*}} k 128 boxes 16384, 16384 : bf16 -> !hopper.frag<64x128xf32>
// CHECK: %[[O:.*]] = hopper.wgmma.rs %{{.*}}, %{{.*}}, %{{.*}} : !hopper.frag<64x128xbf16>, !hopper.frag<64x128xf32>
// CHECK: %[[R:.*]]:2 = hopper.wgmma.wait 1, %[[S]], %[[O]] : !hopper.frag<64x128xf32>, !hopper.frag<64x128xf32>
// CHECK: hopper.softcap %[[R]]#0, %{{.*}} : !hopper.frag<64x128xf32>
// CHECK: hopper.mask %{{.*}} rows %{{.*}} cols %{{.*}} visible @cols(%{{.*}}, %{{.*}}) left_bounded : !hopper.frag<64x128xf32>
// CHECK: hopper.softmax_step %{{.*}} scale %{{.*}} state(%{{.*}}, %{{.*}}) threshold 8.000000e+00 : !hopper.frag<64x128xf32>, !hopper.frag<64xf32>
// CHECK: hopper.softmax_step %{{.*}} scale %{{.*}} : !hopper.frag<64x128xf32>, !hopper.frag<64xf32>
// CHECK: hopper.scale_rows %[[R]]#1, %{{.*}} : !hopper.frag<64x128xf32>, !hopper.frag<64xf32>
// CHECK: hopper.trunc %{{.*}} : !hopper.frag<64x128xf32> to !hopper.frag<64x128xbf16>
func.func private @cols(i32, i32, i32) -> (i32, i32)
func.func @mainloop_step(%dq: i64, %dk: i64, %dv: i64, %p: !hopper.frag<64x128xbf16>,
                         %o: !hopper.frag<64x128xf32>, %m: !hopper.frag<64xf32>,
                         %l: !hopper.frag<64xf32>, %sl2: f32, %pre: f32,
                         %row0: i32, %col0: i32, %sq: i32, %skv: i32)
    -> (!hopper.frag<64x128xbf16>, !hopper.frag<64x128xf32>, i1) {
  %s = hopper.wgmma.ss %dq, %dk k 128 boxes 16384, 16384 : bf16 -> !hopper.frag<64x128xf32>
  %o1 = hopper.wgmma.rs %p, %dv, %o : !hopper.frag<64x128xbf16>, !hopper.frag<64x128xf32>
  %r:2 = hopper.wgmma.wait 1, %s, %o1 : !hopper.frag<64x128xf32>, !hopper.frag<64x128xf32>
  %c = hopper.softcap %r#0, %pre : !hopper.frag<64x128xf32>
  %k = hopper.mask %c rows %row0 cols %col0 visible @cols(%sq, %skv) left_bounded : !hopper.frag<64x128xf32>
  %pf, %m1, %l1, %alpha, %up = hopper.softmax_step %k scale %sl2 state(%m, %l) threshold 8.0
      : !hopper.frag<64x128xf32>, !hopper.frag<64xf32>
  %pf0, %m0, %l0, %a0, %u0 = hopper.softmax_step %k scale %sl2
      : !hopper.frag<64x128xf32>, !hopper.frag<64xf32>
  %o2 = hopper.scale_rows %r#1, %alpha : !hopper.frag<64x128xf32>, !hopper.frag<64xf32>
  %pb = hopper.trunc %pf : !hopper.frag<64x128xf32> to !hopper.frag<64x128xbf16>
  return %pb, %o2, %up : !hopper.frag<64x128xbf16>, !hopper.frag<64x128xf32>, i1
}

// -----

// expected-error @below {{a fragment is 64 rows (a warpgroup's wgmma tile), as 64xN or 64 (one value per row)}}
func.func private @rows(!hopper.frag<128x64xf32>)

// -----

// expected-error @below {{a 64xN fragment of 'bf16' needs N a multiple of 16 up to 256, got 24}}
func.func private @ksteps(!hopper.frag<64x24xbf16>)

// -----

// expected-error @below {{a row vector fragment holds f32, not 'bf16'}}
func.func private @rowvec(!hopper.frag<64xbf16>)

// -----

// expected-error @below {{fragment element type must be f32, bf16, f16 or f8E4M3FN, not 'i32'}}
func.func private @elem(!hopper.frag<64x64xi32>)

// -----

func.func @ss_operands(%a: i64, %b: i64) {
  // expected-error @below {{operands must be bf16 or f16 (k-steps of 16) or f8E4M3FN (k-steps of 32), got 'f32'}}
  %s = hopper.wgmma.ss %a, %b k 64 boxes 8192, 8192 : f32 -> !hopper.frag<64x64xf32>
  return
}

// -----

func.func @ss_k(%a: i64, %b: i64) {
  // expected-error @below {{k must be a multiple of 16 (the k-step of 'bf16'), got 40}}
  %s = hopper.wgmma.ss %a, %b k 40 boxes 8192, 8192 : bf16 -> !hopper.frag<64x64xf32>
  return
}

// -----

func.func @ss_box(%a: i64, %b: i64) {
  // expected-error @below {{box distances must be positive multiples of 16 bytes, got 100 for B}}
  %s = hopper.wgmma.ss %a, %b k 64 boxes 8192, 100 : bf16 -> !hopper.frag<64x64xf32>
  return
}

// -----

func.func @ss_result(%a: i64, %b: i64) {
  // expected-error @below {{the result must be an f32 fragment, got '!hopper.frag<64x64xbf16>'}}
  %s = hopper.wgmma.ss %a, %b k 64 boxes 8192, 8192 : bf16 -> !hopper.frag<64x64xbf16>
  return
}

// -----

func.func @rs_a(%a: !hopper.frag<64x64xf32>, %b: i64, %c: !hopper.frag<64x64xf32>) {
  // expected-error @below {{the register A operand must be a bf16, f16 or f8E4M3FN fragment, got '!hopper.frag<64x64xf32>'}}
  %d = hopper.wgmma.rs %a, %b, %c : !hopper.frag<64x64xf32>, !hopper.frag<64x64xf32>
  return
}

// -----

func.func @step_state(%s: !hopper.frag<64x64xf32>, %sl2: f32, %m: !hopper.frag<64xf32>) {
  // expected-error @below {{the state is m_old and l_old together, or neither (the row's first block)}}
  %p, %m1, %l1, %a, %u = "hopper.softmax_step"(%s, %sl2, %m) {operandSegmentSizes = array<i32: 1, 1, 1, 0>, rescale_threshold = 0.0 : f64}
      : (!hopper.frag<64x64xf32>, f32, !hopper.frag<64xf32>) -> (!hopper.frag<64x64xf32>, !hopper.frag<64xf32>, !hopper.frag<64xf32>, !hopper.frag<64xf32>, i1)
  return
}

// -----

func.func @step_threshold(%s: !hopper.frag<64x64xf32>, %sl2: f32, %m: !hopper.frag<64xf32>, %l: !hopper.frag<64xf32>) {
  // expected-error @below {{rescale_threshold must be within [0, 15] (log2 units), got 2.000000e+01}}
  %p, %m1, %l1, %a, %u = hopper.softmax_step %s scale %sl2 state(%m, %l) threshold 20.0
      : !hopper.frag<64x64xf32>, !hopper.frag<64xf32>
  return
}

// -----

func.func @trunc_shape(%p: !hopper.frag<64x64xf32>) {
  // expected-error @below {{rounds an f32 tile to a bf16, f16 or f8E4M3FN tile of the same shape, not '!hopper.frag<64x64xf32>' to '!hopper.frag<64x128xbf16>'}}
  %b = hopper.trunc %p : !hopper.frag<64x64xf32> to !hopper.frag<64x128xbf16>
  return
}

// -----

func.func private @vis(i32, i32, i32) -> (i32, i32)
func.func @mask_group_transposed(%s: !hopper.frag<64x64xf32>, %i: i32) {
  // expected-error @below {{GQA packing (group) is a forward mask's: the rows of a transposed tile are keys}}
  %m = hopper.mask %s rows %i group %i cols %i visible @vis(%i, %i) transposed : !hopper.frag<64x64xf32>
  return
}

// -----

// A wgmma A operand loaded from shared memory: 8-bit (FP8's Q, k-steps of
// 32 bytes), 16-bit, and K beyond one 128-byte row in boxes.
// CHECK-LABEL: func.func @load_shared
// CHECK: hopper.load_shared %{{.*}}[%{{.*}}] box_bytes 16384 : !hopper.frag<64x128xf8E4M3FN>
// CHECK: hopper.load_shared %{{.*}}[%{{.*}}] box_bytes 0 : !hopper.frag<64x64xbf16>
// CHECK: hopper.load_shared %{{.*}}[%{{.*}}] box_bytes 16384 : !hopper.frag<64x256xf8E4M3FN>
func.func @load_shared(%smem: !llvm.ptr<3>, %off: i32) {
  %q = hopper.load_shared %smem [%off] box_bytes 16384 : !hopper.frag<64x128xf8E4M3FN>
  %b = hopper.load_shared %smem [%off] box_bytes 0 : !hopper.frag<64x64xbf16>
  %w = hopper.load_shared %smem [%off] box_bytes 16384 : !hopper.frag<64x256xf8E4M3FN>
  return
}

// -----

func.func @load_shared_f32(%smem: !llvm.ptr<3>, %off: i32) {
  // expected-error @below {{loads a bf16, f16 or f8E4M3FN tile (a wgmma A operand), got '!hopper.frag<64x64xf32>'}}
  %q = hopper.load_shared %smem [%off] box_bytes 0 : !hopper.frag<64x64xf32>
  return
}

// -----

func.func @load_shared_boxes(%smem: !llvm.ptr<3>, %off: i32) {
  // expected-error @below {{a tile wider than 128 bytes lies in boxes at least 8192 bytes apart, on 1024-byte swizzle atoms; got box_bytes 4096}}
  %q = hopper.load_shared %smem [%off] box_bytes 4096 : !hopper.frag<64x256xf8E4M3FN>
  return
}
