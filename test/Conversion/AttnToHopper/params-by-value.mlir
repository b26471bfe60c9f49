// attn-kernel-params-by-value: the tensor maps (fa3rt_abi.def: passed by
// value) become byval __grid_constant__ arguments of the lowered kernel; the
// other parameters and functions without launch facts are left alone.
// RUN: fa3-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(attn-kernel-params-by-value))' --verify-diagnostics | FileCheck %s

// CHECK-LABEL: llvm.func @k(
// CHECK-SAME: %arg0: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}
// CHECK-SAME: %arg1: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}
// CHECK-SAME: %arg2: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}
// CHECK-SAME: %arg3: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}
// CHECK-SAME: %arg4: !llvm.ptr<1>, %arg5: !llvm.ptr<1>, %arg6: !llvm.ptr<1>, %arg7: i32,
// CHECK-LABEL: llvm.func @helper(
// CHECK-SAME: %arg0: !llvm.ptr)
gpu.module @m {
  llvm.func @k(%mapQ: !llvm.ptr, %mapK: !llvm.ptr, %mapV: !llvm.ptr, %mapO: !llvm.ptr,
               %o: !llvm.ptr<1>, %lse: !llvm.ptr<1>, %cnt: !llvm.ptr<1>,
               %b: i32, %sq: i32, %skv: i32, %hq: i32, %hkv: i32,
               %sb: i64, %ss: i64, %sh: i64, %scale: f32,
               %cuq: !llvm.ptr<1>, %cuk: !llvm.ptr<1>, %used: !llvm.ptr<1>, %maxsq: i32,
               %splits: i32, %oacc: !llvm.ptr<1>, %lacc: !llvm.ptr<1>,
               %pages: !llvm.ptr<1>, %pstride: i32, %psize: i32,
               %qd: !llvm.ptr<1>, %kd: !llvm.ptr<1>, %vd: !llvm.ptr<1>,
               %qdb: i32, %qdh: i32, %qdm: i32, %kdb: i32, %kdh: i32, %kdn: i32,
               %vdb: i32, %vdh: i32, %leftpad: !llvm.ptr<1>,
               %pk: !llvm.ptr<1>, %pv: !llvm.ptr<1>, %psp: i64, %psr: i64, %psh: i64,
               %ppages: i32)
      attributes {nvvm.kernel, attn.launch = {params = ["mapQ", "mapK", "mapV", "mapO", "O", "LSE", "tileCounter", "B", "Sq", "Skv", "Hq", "Hkv", "oStrideB", "oStrideS", "oStrideH", "scaleLog2", "cuSeqlensQ", "cuSeqlensK", "seqUsedK", "maxSeqlenQ", "numSplits", "oAccum", "lseAccum", "pageTable", "pageTableStride", "pageSize", "qDescale", "kDescale", "vDescale", "qDescaleStrideB", "qDescaleStrideH", "qDescaleStrideM", "kDescaleStrideB", "kDescaleStrideH", "kDescaleStrideN", "vDescaleStrideB", "vDescaleStrideH", "leftPadK", "pagedK", "pagedV", "pagedStridePage", "pagedStrideRow", "pagedStrideHead", "pagedPages"]}} {
    nvvm.prefetch tensormap, %mapQ : !llvm.ptr
    llvm.return
  }
  llvm.func @helper(%p: !llvm.ptr) {
    llvm.return
  }
}

// -----

gpu.module @m {
  // expected-error @below {{attn.launch on a function that is not an NVVM kernel: run this pass after gpu-to-nvvm}}
  llvm.func @not_kernel(%p: !llvm.ptr) attributes {attn.launch = {params = ["mapQ"]}} {
    llvm.return
  }
}

// -----

gpu.module @m {
  // expected-error @below {{kernel parameters are not the ABI's (runtime/include/fa3rt_abi.def): 1 arguments, attn.launch params ["mapQ"]}}
  llvm.func @short(%p: !llvm.ptr) attributes {nvvm.kernel, attn.launch = {params = ["mapQ"]}} {
    llvm.return
  }
}

// -----

gpu.module @m {
  // expected-error @below {{parameter mapK is passed by value and read through a generic !llvm.ptr, but its argument is '!llvm.ptr<1>'}}
  llvm.func @k(%mapQ: !llvm.ptr, %mapK: !llvm.ptr<1>, %mapV: !llvm.ptr, %mapO: !llvm.ptr,
               %o: !llvm.ptr<1>, %lse: !llvm.ptr<1>, %cnt: !llvm.ptr<1>,
               %b: i32, %sq: i32, %skv: i32, %hq: i32, %hkv: i32,
               %sb: i64, %ss: i64, %sh: i64, %scale: f32,
               %cuq: !llvm.ptr<1>, %cuk: !llvm.ptr<1>, %used: !llvm.ptr<1>, %maxsq: i32,
               %splits: i32, %oacc: !llvm.ptr<1>, %lacc: !llvm.ptr<1>,
               %pages: !llvm.ptr<1>, %pstride: i32, %psize: i32,
               %qd: !llvm.ptr<1>, %kd: !llvm.ptr<1>, %vd: !llvm.ptr<1>,
               %qdb: i32, %qdh: i32, %qdm: i32, %kdb: i32, %kdh: i32, %kdn: i32,
               %vdb: i32, %vdh: i32, %leftpad: !llvm.ptr<1>,
               %pk: !llvm.ptr<1>, %pv: !llvm.ptr<1>, %psp: i64, %psr: i64, %psh: i64,
               %ppages: i32)
      attributes {nvvm.kernel, attn.launch = {params = ["mapQ", "mapK", "mapV", "mapO", "O", "LSE", "tileCounter", "B", "Sq", "Skv", "Hq", "Hkv", "oStrideB", "oStrideS", "oStrideH", "scaleLog2", "cuSeqlensQ", "cuSeqlensK", "seqUsedK", "maxSeqlenQ", "numSplits", "oAccum", "lseAccum", "pageTable", "pageTableStride", "pageSize", "qDescale", "kDescale", "vDescale", "qDescaleStrideB", "qDescaleStrideH", "qDescaleStrideM", "kDescaleStrideB", "kDescaleStrideH", "kDescaleStrideN", "vDescaleStrideB", "vDescaleStrideH", "leftPadK", "pagedK", "pagedV", "pagedStridePage", "pagedStrideRow", "pagedStrideHead", "pagedPages"]}} {
    llvm.return
  }
}
