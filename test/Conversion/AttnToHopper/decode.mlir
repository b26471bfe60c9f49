// The decoding kernel (attn-hopper-config{decode}: split-KV and GQA
// packing, FlashAttention's flash_attn_with_kvcache): the configuration
// (CONFIG), the kernel's tile grid, split of the kv blocks, packed Q load,
// paged or contiguous K/V, packed mask and the two epilogues (KERNEL), and
// the two kernels beside it (COMBINE): <kernel>_combine, which merges the
// splits, and <kernel>_append, which writes new keys and values into the
// cache.
// RUN: fa3-opt %s --attn-hopper-config="decode=true" | FileCheck %s --check-prefix=CONFIG
// RUN: fa3-opt %s --attn-hopper-config="decode=true block-m=128" | FileCheck %s --check-prefix=CONFIG128
// RUN: fa3-opt %s --attn-hopper-config="decode=true block-n=128" | FileCheck %s --check-prefix=CONFIGN128
// RUN: fa3-opt %s --attn-hopper-config="decode=true stages=2" | FileCheck %s --check-prefix=CONFIGS2
// RUN: sed -e 's/x128xbf16/x256xbf16/g' %s | fa3-opt --attn-hopper-config="decode=true" | FileCheck %s --check-prefix=CONFIG256
// RUN: fa3-opt %s --attn-hopper-config="decode=true" --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=KERNEL
// RUN: sed -e 's/x128xbf16/x192xbf16/g' %s | fa3-opt --attn-hopper-config="decode=true" --attn-tile --convert-attn-to-hopper | FileCheck %s --check-prefix=KERNEL192
// RUN: fa3-opt %s --attn-hopper-config="decode=true" --attn-tile --convert-attn-to-hopper --hopper-warp-specialize --hopper-warp-copy --hopper-async-copy --hopper-overlap --hopper-pingpong --convert-hopper-to-nvvm | FileCheck %s --check-prefix=COMBINE
// paged-kv is a packed batch's option (this kernel takes a page table by itself):
// RUN: not fa3-opt %s --attn-hopper-config="paged-kv=true" 2>&1 | FileCheck %s --check-prefix=PAGEDFIXED
// PAGEDFIXED: error: cannot generate the Hopper kernel: unsupported paged-kv with a fixed-length batch (an option of packed variable-length batches; the decoding kernel, decode=true, takes a page table by itself)

// One CTA per tile of 64 packed rows (one consumer warpgroup, so no
// ping-pong), no cluster, O stored directly (the decoding kernel's own
// settings, whatever the other options say); 128 rows where asked.
// Tiles of 64 keys, three stages, and two CTAs a SM (113 KiB of shared
// memory each); with 128 keys three stages fit only one a SM (CONFIGN128),
// and 128 rows, two consumer warpgroups, keep 128 keys and one.
// CONFIG: attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 64, stages = 3, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = false, tma_store = false, split_kv = true, pack_gqa = true, ctas_per_sm = 2>
// Two stages (asked for) keep one a SM, which two a SM measured slower
// with (too few bytes in flight); head dim 256's tiles (64 keys by default
// there) need more than half an SM's shared memory.
// CONFIGS2: attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 64, stages = 2, {{.*}}, pack_gqa = true>}
// CONFIG256: attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 64, stages = 3, {{.*}}, pack_gqa = true>}
// CONFIGN128: attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 3, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = false, tma_store = false, split_kv = true, pack_gqa = true>}
// CONFIG128: attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 3, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.000000e+00, cluster_m = 1, pingpong = true, tma_store = false, split_kv = true, pack_gqa = true>

// The launch facts name both choices, and that the producer copies small
// pages (paged_copy: the runtime passes the copy's parameters on).
// KERNEL: gpu.func @attn_kernel(
// KERNEL-SAME: ctas_per_sm = 2
// KERNEL-SAME: o_store = "direct"
// KERNEL-SAME: pack_gqa = true
// KERNEL-SAME: paged_copy = true
// KERNEL-SAME: split_kv = true
// KERNEL-SAME: threads = 256
// KERNEL-SAME: nvvm.minctasm = 2 : i32
// K's and V's full barriers count the 128 lanes of the four copying warps
// (each commits its copies by cp.async.mbarrier.arrive.noinc); Q's, filled
// by TMA alone, one producer.
// KERNEL: hopper.ring.create %{{.*}} : !hopper.ring<stages = 1, {{[^>]*}}cluster = 1>
// KERNEL-NEXT: hopper.ring.create %{{.*}} : !hopper.ring<stages = 3, {{.*}}, producers = 128>
// KERNEL-NEXT: hopper.ring.create %{{.*}} : !hopper.ring<stages = 3, {{.*}}, producers = 128>

// Consumers: one warpgroup with the 200 registers a thread that the 56 of
// the producer's (whose warp copies small pages) leave of a CTA's 128 at
// launch, two CTAs a SM (nvvm.minctasm); the kernel pass writes their
// program, with the ring fills that hopper-warp-specialize gives to the
// producer.
// The grid is Sq x (Hq / Hkv) packed rows, Hkv heads and B x numSplits
// batches; a tile's batch coordinate is (split, batch).
// KERNEL: hopper.warp_specialize producer regs 56 {
// KERNEL: } consumers(%{{.*}} of 1) regs 200 {
// KERNEL: %[[G:.*]] = arith.divui %[[HQ:.*]], %[[HKV:[^ ]*]] : i32
// KERNEL: %[[ROWS:.*]] = arith.muli %{{.*}}, %[[G]] : i32
// KERNEL: %[[BS:.*]] = arith.muli %[[B:[^ ]*]], %[[NS:[^ ]*]] : i32
// KERNEL: hopper.tile_grid %[[ROWS]], %[[HKV]], %[[BS]] block_m 64
// KERNEL: hopper.tile_coords {{.*}} longest_first{{$}}
// KERNEL: %[[SPLIT:.*]] = arith.divui %{{.*}}, %[[B]] : i32
// KERNEL: %[[BATCH:.*]] = arith.remui %{{.*}}, %[[B]] : i32
// The batch's keys: seqused_k[b] (a cache's fill) where the launch gives
// the array, else Skv ...
// KERNEL: %[[GIVEN:.*]] = llvm.icmp "ne" %arg18, %{{.*}} : !llvm.ptr<1>
// KERNEL: %[[USED:.*]] = scf.if %[[GIVEN]] -> (i32) {
// KERNEL: llvm.getelementptr %arg18[%[[BATCH]]]
// KERNEL: } else {
// KERNEL: scf.yield %arg9 : i32
// ... clamped to 0 .. Skv (a count past the cache reads none of it) ...
// KERNEL: %[[USED0:.*]] = arith.maxsi %[[USED]], %c0_i32{{(_[0-9]+)?}} : i32
// KERNEL-NEXT: %[[END:.*]] = arith.minsi %[[USED0]], %arg9 : i32
// ... from leftPadK[b] where given (a left-padded cache's first row), else
// 0, clamped to 0 .. the fill: the keys between ...
// KERNEL: %[[PGIVEN0:.*]] = llvm.icmp "ne" %arg37, %{{.*}} : !llvm.ptr<1>
// KERNEL: %[[PAD:.*]] = scf.if %[[PGIVEN0]] -> (i32) {
// KERNEL: llvm.getelementptr %arg37[%[[BATCH]]]
// KERNEL: } else {
// KERNEL: scf.yield %c0_i32{{(_[0-9]+)?}} : i32
// KERNEL: %[[PAD0:.*]] = arith.maxsi %[[PAD]], %c0_i32{{(_[0-9]+)?}} : i32
// KERNEL-NEXT: %[[K0:.*]] = arith.minsi %[[PAD0]], %[[END]] : i32
// KERNEL-NEXT: %[[SKV:.*]] = arith.subi %[[END]], %[[K0]] : i32
// ... and the schedule of the tile's first query (packed row m0 / g) ...
// KERNEL: %[[Q0:.*]] = arith.divui %m0, %{{.*}} : i32
// KERNEL: %[[RNG:.*]]:4 = func.call @attn_kernel_kv_range(%[[Q0]], %arg8, %[[SKV]])
// ... cut to this split's run of ceil(n / numSplits) blocks
// KERNEL: %[[N:.*]] = arith.subi %[[RNG]]#1, %[[RNG]]#0 : i32
// KERNEL: %[[NPS:.*]] = arith.addi %[[N]], %[[NS]] : i32
// KERNEL: %[[NPS1:.*]] = arith.subi %[[NPS]], %c1_i32 : i32
// KERNEL: %[[PER:.*]] = arith.divui %[[NPS1]], %[[NS]] : i32
// KERNEL: %[[START:.*]] = arith.muli %[[SPLIT]], %[[PER]] : i32
// KERNEL: arith.addi %[[RNG]]#0, %[[START]] : i32
// KERNEL: %[[LEFT:.*]] = arith.subi %[[N]], %[[START]] : i32
// KERNEL: %[[SPAN:.*]] = arith.minsi %[[LEFT]], %[[PER]] : i32
// KERNEL: arith.maxsi %[[SPAN]], %c0_i32 : i32
// K and V: from a paged cache where the launch gives a page table (this
// batch's row of it, pageTableStride entries a row; the bound is the row
// past the batch's last key), else tiles of the contiguous cache; their
// rows from the first key's.
// KERNEL: %[[PSTRIDE:.*]] = arith.extui %arg24 : i32 to i64
// KERNEL: %[[POFF:.*]] = arith.muli %{{.*}}, %[[PSTRIDE]] : i64
// KERNEL: %[[PROW:.*]] = llvm.getelementptr %arg23[%[[POFF]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
// KERNEL: %[[PGIVEN:.*]] = llvm.icmp "ne" %arg23, %{{.*}} : !llvm.ptr<1>
// KERNEL: %[[PAGES:.*]] = llvm.select %[[PGIVEN]], %[[PROW]], %{{.*}} : i1, !llvm.ptr<1>
// KERNEL: %[[BOUND:.*]] = arith.addi %[[K0]], %[[SKV]] : i32
// Q: the tile's g heads x 64 / g queries, from q head kv head x g.
// KERNEL: hopper.ring.fill
// KERNEL: %[[QH:.*]] = arith.muli %{{.*}}, %{{.*}} : i32
// KERNEL: hopper.load_tile %arg0[%{{.*}}, %[[QH]], %[[BATCH]]] into %{{.*}} rows 64 cols 128 : bf16
// KERNEL: scf.for
// KERNEL: %[[COL:.*]] = arith.muli %{{.*}}, %c64_i32 : i32
// KERNEL-NEXT: %[[ROW:.*]] = arith.addi %[[K0]], %[[COL]] : i32
// Pages of fewer rows than a tile: the launch gives the pools (pagedK,
// pagedV, their byte strides and page count), copied by the lanes of the
// four producer warps; else one TMA box a page's rows.
// KERNEL: hopper.ring.fill
// KERNEL: %[[PAGED:.*]] = llvm.icmp "ne" %[[PAGES]], %{{.*}} : !llvm.ptr<1>
// KERNEL: scf.if %[[PAGED]] {
// KERNEL: %[[KGIVEN:.*]] = llvm.icmp "ne" %arg38, %{{.*}} : !llvm.ptr<1>
// KERNEL-NEXT: scf.if %[[KGIVEN]] {
// KERNEL-NEXT: hopper.copy_paged_tile %arg38[%[[ROW]], %head] strides %arg40, %arg41, %arg42 pages %[[PAGES]] page_size %arg25 pool %arg43 bound %[[BOUND]] into %{{.*}} rows 64 cols 128 warps 4 : bf16
// KERNEL-NEXT: } else {
// KERNEL-NEXT: hopper.load_paged_tile %arg1[%[[ROW]], %head] pages %[[PAGES]] page_size %arg25 bound %[[BOUND]] into
// KERNEL-NEXT: }
// KERNEL-NEXT: } else {
// KERNEL-NEXT: hopper.load_tile %arg1[%[[ROW]], %head, %[[BATCH]]] into
// KERNEL: hopper.copy_paged_tile %arg39[%[[ROW]], %head] strides %arg40, %arg41, %arg42 pages %[[PAGES]] page_size %arg25 pool %arg43 bound %[[BOUND]] into
// KERNEL: hopper.load_paged_tile %arg2[%[[ROW]], %head] pages %[[PAGES]] page_size %arg25 bound %[[BOUND]] into
// KERNEL: hopper.load_tile %arg2[%[[ROW]], %head, %[[BATCH]]] into
// Head dim 192's rows are 24 pieces of 16 bytes, not whole passes of the
// warp's 32 lanes: TMA boxes for every page size, and the producer's 24
// registers; the facts say no paged_copy.
// KERNEL192: gpu.func @attn_kernel(
// KERNEL192-NOT: paged_copy
// KERNEL192-NOT: producers =
// KERNEL192: hopper.warp_specialize producer regs 24 {
// KERNEL192-NOT: hopper.copy_paged_tile
// KERNEL192: hopper.load_paged_tile
// KERNEL192-NOT: hopper.copy_paged_tile
// The mask's rows are packed (query = row / g) ...
// KERNEL: hopper.mask %{{.*}} rows %{{.*}} group %{{.*}} cols
// ... numSplits > 1: this split's O (f32) and LSE at (split, batch) of the
// partial outputs; else O and LSE themselves.
// KERNEL: %[[MANY:.*]] = arith.cmpi sgt, %{{.*}}, %c1_i32 : i32
// KERNEL: scf.if %[[MANY]] {
// KERNEL: hopper.store_o %{{.*}} to %arg21 strides(%{{.*}}, %c128_i64, %{{.*}}) rows %{{.*}} group %{{.*}} head %{{.*}} batch %{{.*}} bound %{{.*}} : !hopper.frag<64x128xf32> as f32
// KERNEL: hopper.store_lse %{{.*}} to %arg22 rows %{{.*}} group %{{.*}} head
// KERNEL: } else {
// KERNEL: hopper.store_o %{{.*}} to %arg4 strides(%arg12, %arg13, %arg14) rows %{{.*}} group %{{.*}} head %{{.*}} batch %{{.*}} bound %{{.*}} : !hopper.frag<64x128xf32> as bf16
// KERNEL: hopper.store_lse %{{.*}} to %arg5 rows %{{.*}} group %{{.*}} head

// <kernel>_combine: 256 threads, a grid-stride loop over 4-column chunks;
// per chunk the splits' max LSE, then the weights exp2((lse - max) log2 e)
// and their sum with the partial O's, one 16-byte load a split; o rounded
// once and stored 8 bytes; the LSE by the row's first thread.
// COMBINE: gpu.func @attn_kernel_combine(%{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32) kernel
// COMBINE-SAME: nvvm.maxntid = array<i32: 256, 1, 1>
// COMBINE: scf.for
// COMBINE: arith.divui %{{.*}}, %c32_i64 : i64
// COMBINE: arith.remui %{{.*}}, %c32_i64 : i64
// COMBINE: scf.for {{.*}} iter_args
// COMBINE: arith.maxnumf
// COMBINE: arith.cmpf oeq
// COMBINE: scf.for {{.*}} iter_args
// COMBINE: "ex2.approx.ftz.f32 $0, $1;"
// COMBINE: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// COMBINE: llvm.intr.fma
// COMBINE: arith.truncf %{{.*}} : vector<4xf32> to vector<4xbf16>
// COMBINE: llvm.store %{{.*}} {alignment = 8 : i64} : vector<4xbf16>, !llvm.ptr<1>
// COMBINE: "lg2.approx.ftz.f32 $0, $1;"
// COMBINE: scf.if
// COMBINE: llvm.store %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>

// <kernel>_append: 16 bytes a thread from k_new's row (b, s, h) into the
// cache's row cache_seqlens[b] + s, through the page table when there is
// one (page table[b][row / page_size], row % page_size), then v_new's,
// then the lengths after the append; no row at or past the cache's Skv is
// written (a count beyond the cache, or a negative one, writes none there),
// nor a row of a page outside the pool (a table entry at or past numPages,
// or a negative one).
// COMBINE: gpu.func @attn_kernel_append(
// COMBINE-SAME: nvvm.maxntid = array<i32: 256, 1, 1>
// COMBINE: scf.for
// COMBINE: %[[SRC:.*]] = llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// COMBINE: %[[LEN:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// COMBINE: %[[LEN64:.*]] = arith.extui %[[LEN]] : i32 to i64
// COMBINE: %[[ROW:.*]] = arith.addi %[[LEN64]], %{{.*}} : i64
// (no row written at or past the cache's Skv, the last parameter)
// COMBINE: %[[SKV64:.*]] = arith.extui %arg25 : i32 to i64
// COMBINE: %[[INSIDE:.*]] = arith.cmpi ult, %[[ROW]], %[[SKV64]] : i64
// COMBINE: scf.if %[[INSIDE]] {
// COMBINE: %[[PLACE:.*]]:3 = scf.if %{{.*}} -> (i64, i64, i1) {
// COMBINE: arith.divui %[[ROW]], %{{.*}} : i64
// COMBINE: %[[PAGE:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// COMBINE: %[[IN:.*]] = arith.remui %[[ROW]], %{{.*}} : i64
// (the page in the pool: numPages, parameter 19, unsigned)
// COMBINE: %[[INPOOL:.*]] = arith.cmpi ult, %[[PAGE]], %arg19 : i32
// COMBINE: %[[PAGE64:.*]] = arith.extui %[[PAGE]] : i32 to i64
// COMBINE: scf.yield %[[PAGE64]], %[[IN]], %[[INPOOL]] : i64, i64, i1
// COMBINE: } else {
// COMBINE: scf.yield %{{.*}}, %[[ROW]], %true : i64, i64, i1
// COMBINE: scf.if %[[PLACE]]#2 {
// COMBINE: llvm.store %[[SRC]], %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// COMBINE: scf.for
// COMBINE: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// COMBINE: scf.for
// COMBINE: arith.addi %{{.*}}, %arg23 : i32
// COMBINE: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<1>

func.func @attn(%q: memref<?x8x?x128xbf16>, %k: memref<?x2x?x128xbf16>, %v: memref<?x2x?x128xbf16>,
                %o: memref<?x8x?x128xbf16>, %lse: memref<?x8x?xf32>) {
  attn.flash_attention ins(%q, %k, %v : memref<?x8x?x128xbf16>, memref<?x2x?x128xbf16>, memref<?x2x?x128xbf16>)
    outs(%o, %lse : memref<?x8x?x128xbf16>, memref<?x8x?xf32>) causal
  return
}
