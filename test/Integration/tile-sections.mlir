// hopper.tile_coords with sections, lowered by convert-hopper-to-nvvm and run
// on the CPU with mlir-runner: for grids of numM m-blocks x Hq heads x B
// batches and sections of n (head, batch) pairs (n = 1, n > Hq B, Hq B a
// multiple of n or not), every (m-block, pair) is some tile's exactly once
// and nothing lies outside the grid. Three small grids' orders are printed
// whole: within a section the m-blocks run last to first across its pairs,
// and the sections are as even as they divide (at most n pairs each).
// RUN: fa3-opt %s --convert-hopper-to-nvvm | mlir-opt --pass-pipeline="builtin.module(convert-vector-to-scf,convert-scf-to-cf,convert-vector-to-llvm,finalize-memref-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,convert-func-to-llvm,convert-index-to-llvm,reconcile-unrealized-casts)" | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s

// numM 3, Hq 2, B 2 (4 pairs), n 2: two sections of 2 pairs; tile t:
// (m-block, head, batch). Section 0 (pairs 0, 1: batch 0) from m-block 2
// down, then section 1 (batch 1).
// CHECK: ( 2, 0, 0 )
// CHECK-NEXT: ( 2, 1, 0 )
// CHECK-NEXT: ( 1, 0, 0 )
// CHECK-NEXT: ( 1, 1, 0 )
// CHECK-NEXT: ( 0, 0, 0 )
// CHECK-NEXT: ( 0, 1, 0 )
// CHECK-NEXT: ( 2, 0, 1 )
// CHECK-NEXT: ( 2, 1, 1 )
// CHECK-NEXT: ( 1, 0, 1 )
// CHECK-NEXT: ( 1, 1, 1 )
// CHECK-NEXT: ( 0, 0, 1 )
// CHECK-NEXT: ( 0, 1, 1 )
// numM 2, Hq 1, B 5, n 2: ceil(5 / 2) = 3 sections, of 2, 2 and 1 pairs.
// CHECK-NEXT: ( 1, 0, 0 )
// CHECK-NEXT: ( 1, 0, 1 )
// CHECK-NEXT: ( 0, 0, 0 )
// CHECK-NEXT: ( 0, 0, 1 )
// CHECK-NEXT: ( 1, 0, 2 )
// CHECK-NEXT: ( 1, 0, 3 )
// CHECK-NEXT: ( 0, 0, 2 )
// CHECK-NEXT: ( 0, 0, 3 )
// CHECK-NEXT: ( 1, 0, 4 )
// CHECK-NEXT: ( 0, 0, 4 )
// numM 2, Hq 1, B 7, n 3: 3 sections, of 3, 2 and 2 pairs.
// CHECK-NEXT: ( 1, 0, 0 )
// CHECK-NEXT: ( 1, 0, 1 )
// CHECK-NEXT: ( 1, 0, 2 )
// CHECK-NEXT: ( 0, 0, 0 )
// CHECK-NEXT: ( 0, 0, 1 )
// CHECK-NEXT: ( 0, 0, 2 )
// CHECK-NEXT: ( 1, 0, 3 )
// CHECK-NEXT: ( 1, 0, 4 )
// CHECK-NEXT: ( 0, 0, 3 )
// CHECK-NEXT: ( 0, 0, 4 )
// CHECK-NEXT: ( 1, 0, 5 )
// CHECK-NEXT: ( 1, 0, 6 )
// CHECK-NEXT: ( 0, 0, 5 )
// CHECK-NEXT: ( 0, 0, 6 )
// Every grid: tiles, then cells not covered exactly once or out of range.
// CHECK-NEXT: ( 1, 0 )
// CHECK-NEXT: ( 24, 0 )
// CHECK-NEXT: ( 24, 0 )
// CHECK-NEXT: ( 135, 0 )
// CHECK-NEXT: ( 70, 0 )
// CHECK-NEXT: ( 9, 0 )
// CHECK-NEXT: ( 42, 0 )
// CHECK-NEXT: ( 512, 0 )
// CHECK-NEXT: ( 2048, 0 )

func.func @coords(%t: i32, %numM: i32, %hq: i32, %n: i32, %hb: i32) -> (i32, i32, i32) {
  %m0, %head, %batch = hopper.tile_coords %t in %numM, %hq block_m 1 longest_first sections %n of %hb
  return %m0, %head, %batch : i32, i32, i32
}

func.func @print_order(%numM: i32, %hq: i32, %b: i32, %n: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %hb = arith.muli %hq, %b : i32
  %tiles = arith.muli %numM, %hb : i32
  %nt = arith.index_cast %tiles : i32 to index
  scf.for %i = %c0 to %nt step %c1 {
    %t = arith.index_cast %i : index to i32
    %m, %h, %bb = func.call @coords(%t, %numM, %hq, %n, %hb) : (i32, i32, i32, i32, i32) -> (i32, i32, i32)
    vector.print punctuation <open>
    vector.print %m : i32 punctuation <comma>
    vector.print %h : i32 punctuation <comma>
    vector.print %bb : i32 punctuation <close>
    vector.print punctuation <newline>
  }
  return
}

// Tiles, and the cells (m-block, pair) not hit exactly once plus the
// tiles whose coordinates fall outside the grid.
func.func @check(%numM: i32, %hq: i32, %b: i32, %n: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  %hb = arith.muli %hq, %b : i32
  %tiles = arith.muli %numM, %hb : i32
  %nt = arith.index_cast %tiles : i32 to index
  %seen = memref.alloc(%nt) : memref<?xi32>
  scf.for %i = %c0 to %nt step %c1 {
    memref.store %z, %seen[%i] : memref<?xi32>
  }
  %outside = scf.for %i = %c0 to %nt step %c1 iter_args(%bad = %z) -> (i32) {
    %t = arith.index_cast %i : index to i32
    %m, %h, %bb = func.call @coords(%t, %numM, %hq, %n, %hb) : (i32, i32, i32, i32, i32) -> (i32, i32, i32)
    %mOk = arith.cmpi ult, %m, %numM : i32
    %hOk = arith.cmpi ult, %h, %hq : i32
    %bOk = arith.cmpi ult, %bb, %b : i32
    %ok0 = arith.andi %mOk, %hOk : i1
    %ok = arith.andi %ok0, %bOk : i1
    %next = scf.if %ok -> (i32) {
      %pb = arith.muli %bb, %hq : i32
      %pair = arith.addi %pb, %h : i32
      %row = arith.muli %m, %hb : i32
      %cell = arith.addi %row, %pair : i32
      %ci = arith.index_cast %cell : i32 to index
      %old = memref.load %seen[%ci] : memref<?xi32>
      %new = arith.addi %old, %one : i32
      memref.store %new, %seen[%ci] : memref<?xi32>
      scf.yield %bad : i32
    } else {
      %more = arith.addi %bad, %one : i32
      scf.yield %more : i32
    }
    scf.yield %next : i32
  }
  %wrong = scf.for %i = %c0 to %nt step %c1 iter_args(%bad = %outside) -> (i32) {
    %v = memref.load %seen[%i] : memref<?xi32>
    %once = arith.cmpi eq, %v, %one : i32
    %more = arith.addi %bad, %one : i32
    %r = arith.select %once, %bad, %more : i32
    scf.yield %r : i32
  }
  memref.dealloc %seen : memref<?xi32>
  vector.print punctuation <open>
  vector.print %tiles : i32 punctuation <comma>
  vector.print %wrong : i32 punctuation <close>
  vector.print punctuation <newline>
  return
}

func.func @main() {
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  %c4 = arith.constant 4 : i32
  %c5 = arith.constant 5 : i32
  %c6 = arith.constant 6 : i32
  %c7 = arith.constant 7 : i32
  %c8 = arith.constant 8 : i32
  %c9 = arith.constant 9 : i32
  %c16 = arith.constant 16 : i32
  %c32 = arith.constant 32 : i32
  %c100 = arith.constant 100 : i32
  call @print_order(%c3, %c2, %c2, %c2) : (i32, i32, i32, i32) -> ()
  call @print_order(%c2, %c1, %c5, %c2) : (i32, i32, i32, i32) -> ()
  call @print_order(%c2, %c1, %c7, %c3) : (i32, i32, i32, i32) -> ()
  // numM, Hq, B, n
  call @check(%c1, %c1, %c1, %c1) : (i32, i32, i32, i32) -> ()
  call @check(%c4, %c3, %c2, %c1) : (i32, i32, i32, i32) -> ()
  call @check(%c4, %c3, %c2, %c4) : (i32, i32, i32, i32) -> ()
  call @check(%c5, %c3, %c9, %c2) : (i32, i32, i32, i32) -> ()
  call @check(%c7, %c2, %c5, %c3) : (i32, i32, i32, i32) -> ()
  call @check(%c3, %c3, %c1, %c100) : (i32, i32, i32, i32) -> ()
  call @check(%c6, %c1, %c7, %c7) : (i32, i32, i32, i32) -> ()
  call @check(%c32, %c4, %c4, %c5) : (i32, i32, i32, i32) -> ()
  call @check(%c16, %c8, %c16, %c6) : (i32, i32, i32, i32) -> ()
  return
}
