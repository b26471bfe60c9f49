//===- HopperOps.cpp - the hopper dialect ---------------------------------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace fa3::hopper;

#include "fa3/Dialect/Hopper/IR/HopperOpsDialect.cpp.inc"
#include "fa3/Dialect/Hopper/IR/HopperOpsEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fa3/Dialect/Hopper/IR/HopperOpsAttrs.cpp.inc"

void HopperDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fa3/Dialect/Hopper/IR/HopperOpsAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "fa3/Dialect/Hopper/IR/HopperOps.cpp.inc"
      >();
}

int64_t fa3::hopper::namedBarrierBase(BarrierKind kind, int64_t consumers) {
  // 0 is the CTA barrier; the turns of the two ping-pong consumers come
  // first, then one epilogue and one vote barrier per consumer.
  constexpr int64_t kTurns = 2;
  switch (kind) {
  case BarrierKind::turn: return 1;
  case BarrierKind::epilogue: return 1 + kTurns;
  case BarrierKind::vote: return 1 + kTurns + consumers;
  }
  llvm_unreachable("unknown barrier kind");
}

namespace {
/// Checks what the named-barrier ops share: the turns are between two
/// consumers, a constant consumer index is one of them, and bar.sync counts
/// whole warps.
template <typename Op>
LogicalResult verifyNamedBarrier(Op op) {
  int64_t consumers = op.getConsumers();
  if (op.getKind() == BarrierKind::turn && consumers != 2)
    return op.emitOpError("turn barriers pass the turn between two consumer "
                          "warpgroups, not ")
           << consumers;
  if (op.getThreads() % 32 != 0)
    return op.emitOpError("threads must be a multiple of 32 (whole warps), got ")
           << op.getThreads();
  APInt c;
  if (matchPattern(op.getConsumer(), m_ConstantInt(&c)) &&
      (c.isNegative() || c.getSExtValue() >= consumers))
    return op.emitOpError("consumer ")
           << c.getSExtValue() << " is not one of the " << consumers
           << " consumer warpgroups";
  return success();
}
} // namespace

LogicalResult NamedBarrierSyncOp::verify() { return verifyNamedBarrier(*this); }
LogicalResult NamedBarrierArriveOp::verify() { return verifyNamedBarrier(*this); }

#define GET_OP_CLASSES
#include "fa3/Dialect/Hopper/IR/HopperOps.cpp.inc"
