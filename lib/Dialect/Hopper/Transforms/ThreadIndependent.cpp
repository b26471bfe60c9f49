//===- ThreadIndependent.cpp - what another thread may compute again ------===//
//
// The producer thread's program is the consumers' arithmetic and reads
// computed again by another thread (hopper-warp-specialize), and warp 0's
// program is that one run by a whole warp (hopper-producer-warp-transpose):
// both ask which ops give the same result whichever thread runs them.
//
//===----------------------------------------------------------------------===//

#include "ThreadIndependent.h"

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace fa3::hopper;

/// Whether `op` reads which thread runs it: the producer thread computing
/// it again would get its own index, not the consumers'.
bool fa3::hopper::readsThreadIndex(Operation *op) {
  if (isa<NVVM::ThreadIdXOp, NVVM::ThreadIdYOp, NVVM::ThreadIdZOp,
          NVVM::LaneIdOp, NVVM::WarpIdOp, gpu::ThreadIdOp, gpu::LaneIdOp>(op))
    return true;
  auto isFrag = [](Type t) { return isa<FragmentType>(t); };
  // a warpgroup's registers: each thread holds its own part
  return llvm::any_of(op->getOperandTypes(), isFrag) ||
         llvm::any_of(op->getResultTypes(), isFrag);
}

/// Why the producer thread may not run `root` again for itself, or "" if
/// it may: arithmetic, reads of global or constant memory (which no role
/// writes while the kernel runs), calls of functions that do only that.
/// Shared memory is the rings' (a read there would not wait for the
/// data); a write, a barrier or a warp-wide instruction (one lane runs the
/// producer thread) would change what the kernel does; so would a value of
/// the thread's own. `callees`: the functions on the way, so that a
/// recursive one ends the walk.
static std::string whyNotRepeatableIn(Operation *root, bool inCallee,
                                      SmallPtrSetImpl<Operation *> &callees) {
  std::string why;
  root->walk([&](Operation *op) -> WalkResult {
    if (readsThreadIndex(op)) {
      why = "'" + op->getName().getStringRef().str() +
            "' is the thread's own (the producer thread is another)";
      return WalkResult::interrupt();
    }
    if (isa<WarpUniformOp>(op)) {
      // dropped where the pass clones it; a callee keeps its shuffle
      if (inCallee)
        why = "a called function shuffles a warp (one lane runs the "
              "producer thread)";
      return why.empty() ? WalkResult::advance() : WalkResult::interrupt();
    }
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto f = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          op, call.getCalleeAttr());
      if (!f || f.isExternal())
        why = "it calls a function without a body";
      else if (!callees.insert(f).second)
        why = "it calls a function that calls itself";
      else {
        why = whyNotRepeatableIn(f, /*inCallee=*/true, callees);
        callees.erase(f);
      }
      return why.empty() ? WalkResult::advance() : WalkResult::interrupt();
    }
    if (auto load = dyn_cast<LLVM::LoadOp>(op)) {
      unsigned space =
          cast<LLVM::LLVMPointerType>(load.getAddr().getType())
              .getAddressSpace();
      if (space != 1 && space != 4)
        why = "'llvm.load' reads shared or generic memory (the consumers "
              "read it only after their waits)";
      return why.empty() ? WalkResult::advance() : WalkResult::interrupt();
    }
    if (auto a = dyn_cast<LLVM::InlineAsmOp>(op)) {
      if (a.getHasSideEffects())
        why = "'llvm.inline_asm' has side effects";
      return why.empty() ? WalkResult::advance() : WalkResult::interrupt();
    }
    if (auto mem = dyn_cast<MemoryEffectOpInterface>(op)) {
      if (!mem.hasNoEffect())
        why = "'" + op->getName().getStringRef().str() +
              "' touches memory or synchronizes";
      return why.empty() ? WalkResult::advance() : WalkResult::interrupt();
    }
    // an op whose effects are those of its regions: the walk visits them.
    // (Named, not found by hasTrait<>: a trait's TypeID comes from its
    // spelled type name, which GCC spells unlike the clang that built
    // libMLIR, so in a GCC build hasTrait<> does not see upstream traits.)
    if (isa<scf::IfOp, scf::ForOp, scf::WhileOp, scf::ExecuteRegionOp,
            func::FuncOp>(op))
      return WalkResult::advance();
    why = "'" + op->getName().getStringRef().str() +
          "' may write memory, synchronize or need the whole warp";
    return WalkResult::interrupt();
  });
  return why;
}

std::string fa3::hopper::whyNotRepeatable(Operation *op) {
  SmallPtrSet<Operation *, 4> callees;
  return whyNotRepeatableIn(op, /*inCallee=*/false, callees);
}
