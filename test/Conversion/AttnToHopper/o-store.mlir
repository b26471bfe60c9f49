// The epilogue's O store (attn-hopper-config{tma-store}).
//
// Head dim 64: O gets its own shared-memory buffer after the K/V ring
// (16 KiB more; and a second Q buffer, 16 KiB), so a persistent CTA's producer can load the next tile's Q
// while O is stored; before staging the next tile's O, the buffer must have
// been read by the previous store.
// RUN: fa3-opt %s --split-input-file --attn-hopper-config="block-m=128 block-n=64 persistent=on stages=2" --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=OWN
// OWN-LABEL: gpu.func @d64_kernel
// OWN-SAME: dynamic_smem = 82048
// OWN-SAME: o_store = "tma"
// OWN: } consumers(%{{.*}} of 2) regs 240 {
// OWN: nvvm.cp.async.bulk.wait_group 0 {read}
// OWN-NEXT: }
// OWN-NEXT: hopper.named_barrier.sync epilogue[%{{.*}}] of 2 threads 128
// OWN-COUNT-4: nvvm.stmatrix
// OWN: nvvm.fence.proxy
// OWN: nvvm.cp.async.bulk.tensor.global.shared.cta
// OWN-NEXT: nvvm.cp.async.bulk.commit.group
// OWN-NEXT: }
// OWN-NOT: hopper.ring.consumer_release
// OWN: nvvm.cp.async.bulk.wait_group 0 {read}
// OWN: gpu.return
//
// Head dim 256: no room for a separate buffer (Q 64 KiB + a 2 x 2 x 32 KiB
// ring), so O is staged in Q's buffer (the shared memory size does not grow);
// a persistent CTA frees Q only after the store has read it.
// OWN-LABEL: gpu.func @d256_kernel
// OWN-SAME: dynamic_smem = 196704
// OWN: } consumers(%{{.*}} of 2) regs 240 {
// OWN-NOT: nvvm.cp.async.bulk.wait_group
// OWN-COUNT-16: nvvm.stmatrix
// OWN: nvvm.cp.async.bulk.commit.group
// OWN-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// OWN-NEXT: }
// OWN-NEXT: hopper.named_barrier.sync epilogue[%{{.*}}] of 2 threads 128
// OWN-NEXT: hopper.ring.consumer_release %{{.*}}[%{{.*}}] : !hopper.ring<stages = 1, stage_bytes = 65536, data = 0,

// tma-store=false: 4-byte stores from the fragment, no staging buffer (the
// persistent default still double-buffers Q).
// RUN: fa3-opt %s --split-input-file --attn-hopper-config="block-m=128 block-n=64 tma-store=false stages=2" --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=DIRECT
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
