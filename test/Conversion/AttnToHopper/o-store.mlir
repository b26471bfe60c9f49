// The epilogue's O store (attn-hopper-config{tma-store}): hopper.store_o
// with its tma clause, which hopper-async-copy writes as hopper.store_o_tma
// (its flags, OPS), and its lowering (OWN).
//
// Head dim 64: O gets its own shared-memory buffer after the K/V ring
// (16 KiB more; and a second Q buffer, 16 KiB), so a persistent CTA's producer can load the next tile's Q
// while O is stored; before staging the next tile's O, the buffer must have
// been read by the previous store (wait_previous).
// RUN: fa3-opt %s --split-input-file --attn-hopper-config="block-m=128 block-n=64 persistent=on stages=2" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy | FileCheck %s --check-prefix=OPS
// RUN: fa3-opt %s --split-input-file --attn-hopper-config="block-m=128 block-n=64 persistent=on stages=2" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --convert-hopper-to-nvvm | FileCheck %s --check-prefix=OWN
// OPS-LABEL: gpu.func @d64_kernel
// OPS: } consumers(%[[CW:.*]] of 2) regs 240 {
// OPS: %[[INV:.*]], %[[LSE:.*]] = hopper.finalize_rows
// OPS: hopper.store_o_tma %{{.*}}, %[[INV]] to %{{.*}} tile(%{{.*}}, %{{.*}}, %{{.*}}) staging %{{.*}}[65536] consumer[%[[CW]]] of 2 wait_previous : !hopper.frag<64x64xf32> as bf16
// OPS-NEXT: hopper.store_lse %[[LSE]]
// OWN-LABEL: gpu.func @d64_kernel
// OWN-SAME: dynamic_smem = 82048
// OWN-SAME: o_store = "tma"
// OWN: nvvm.setmaxregister increase 240
// OWN: nvvm.cp.async.bulk.wait_group 0 {read}
// OWN-NEXT: }
// OWN-NEXT: %[[C3:.*]] = arith.constant 3 : i32
// OWN-NEXT: %[[EPI:.*]] = arith.addi %{{.*}}, %[[C3]] : i32
// OWN-NEXT: %[[N128:.*]] = arith.constant 128 : i32
// OWN-NEXT: nvvm.barrier id = %[[EPI]] number_of_threads = %[[N128]]
// OWN-COUNT-4: nvvm.stmatrix
// OWN-NOT: nvvm.stmatrix
// OWN: nvvm.fence.proxy
// OWN: nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// OWN: nvvm.cp.async.bulk.tensor.global.shared.cta
// OWN-NEXT: nvvm.cp.async.bulk.commit.group
// OWN-NEXT: }
// OWN-NOT: hopper.ring.consumer_release
// OWN: nvvm.cp.async.bulk.wait_group 0 {read}
// OWN: gpu.return
//
// Head dim 256: no room for a separate buffer (Q 64 KiB + a 2 x 2 x 32 KiB
// ring), so O is staged in Q's buffer (the shared memory size does not grow);
// a persistent CTA frees Q only after the store has read it (drain, then the
// arrive on Q's empty barrier).
// OPS-LABEL: gpu.func @d256_kernel
// OPS: hopper.store_o_tma %{{.*}} staging %{{.*}}[0] consumer[%{{.*}}] of 2 drain : !hopper.frag<64x256xf32> as bf16
// OPS-NEXT: hopper.ring.consumer_release %{{.*}}[%{{.*}}] : !hopper.ring<stages = 1, stage_bytes = 65536, data = 0,
// OPS-NEXT: hopper.store_lse
// OWN-LABEL: gpu.func @d256_kernel
// OWN-SAME: dynamic_smem = 196704
// OWN: nvvm.setmaxregister increase 240
// OWN-NOT: nvvm.cp.async.bulk.wait_group
// OWN-COUNT-16: nvvm.stmatrix
// OWN: nvvm.cp.async.bulk.commit.group
// OWN-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// OWN-NEXT: }
// OWN-NEXT: %[[C3:.*]] = arith.constant 3 : i32
// OWN-NEXT: %[[EPI:.*]] = arith.addi %{{.*}}, %[[C3]] : i32
// OWN-NEXT: %[[N128:.*]] = arith.constant 128 : i32
// OWN-NEXT: nvvm.barrier id = %[[EPI]] number_of_threads = %[[N128]]
// OWN: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>

// tma-store=false: hopper.store_o_direct, 4-byte stores from the fragment,
// no staging buffer (the persistent default still double-buffers Q).
// RUN: fa3-opt %s --split-input-file --attn-hopper-config="block-m=128 block-n=64 tma-store=false stages=2" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy | FileCheck %s --check-prefix=DOPS
// RUN: fa3-opt %s --split-input-file --attn-hopper-config="block-m=128 block-n=64 tma-store=false stages=2" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-async-copy --convert-hopper-to-nvvm | FileCheck %s --check-prefix=DIRECT
// DOPS-LABEL: gpu.func @d64_kernel
// DOPS: %[[INV:.*]], %[[LSE:.*]] = hopper.finalize_rows
// DOPS: hopper.store_o_direct %{{.*}}, %[[INV]] to %{{.*}} strides(%{{.*}}, %{{.*}}, %{{.*}}) rows %[[ROW0:.*]] head %{{.*}} batch %{{.*}} bound %{{.*}} : !hopper.frag<64x64xf32> as bf16
// DOPS-NEXT: hopper.store_lse %[[LSE]] to %{{.*}} rows %[[ROW0]]
// DOPS-NOT: hopper.store_o_tma
// DIRECT-LABEL: gpu.func @d64_kernel
// DIRECT-SAME: dynamic_smem = 65664
// DIRECT-SAME: o_store = "direct"
// DIRECT-NOT: nvvm.stmatrix
// DIRECT-NOT: nvvm.cp.async.bulk.tensor.global.shared.cta
// DIRECT: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>
// DIRECT-NOT: nvvm.cp.async.bulk.wait_group
// DIRECT: gpu.return

func.func @d64(%q: memref<?x4x?x64xbf16>, %k: memref<?x4x?x64xbf16>, %v: memref<?x4x?x64xbf16>,
               %o: memref<?x4x?x64xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x4x?x64xbf16>, memref<?x4x?x64xbf16>, memref<?x4x?x64xbf16>)
    outs(%o : memref<?x4x?x64xbf16>)
  return
}

// -----

func.func @d256(%q: memref<?x4x?x256xbf16>, %k: memref<?x4x?x256xbf16>, %v: memref<?x4x?x256xbf16>,
                %o: memref<?x4x?x256xbf16>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x4x?x256xbf16>, memref<?x4x?x256xbf16>, memref<?x4x?x256xbf16>)
    outs(%o : memref<?x4x?x256xbf16>)
  return
}
