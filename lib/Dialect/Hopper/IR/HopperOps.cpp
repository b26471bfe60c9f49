//===- HopperOps.cpp - the hopper dialect ---------------------------------===//

#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Dialect/Hopper/IR/HopperLimits.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
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

// The types' parsers and verifiers are beside their ops (HopperRing.cpp,
// HopperFragment.cpp).
#define GET_TYPEDEF_CLASSES
#include "fa3/Dialect/Hopper/IR/HopperOpsTypes.cpp.inc"

void HopperDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "fa3/Dialect/Hopper/IR/HopperOpsTypes.cpp.inc"
      >();
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
  // first, then one epilogue, one vote and one stage barrier per consumer,
  // then FP8's transposer barrier, then the backward's dQ staging: one
  // free and one full barrier per consumer. The producer warps' copy
  // barrier takes the last id, which the others reach at no count of
  // consumers (reduce_full's last is 13 with two).
  constexpr int64_t kTurns = 2;
  switch (kind) {
  case BarrierKind::turn: return 1;
  case BarrierKind::epilogue: return 1 + kTurns;
  case BarrierKind::vote: return 1 + kTurns + consumers;
  case BarrierKind::stage: return 1 + kTurns + 2 * consumers;
  case BarrierKind::transpose: return 1 + kTurns + 3 * consumers;
  case BarrierKind::reduce_free: return 2 + kTurns + 3 * consumers;
  case BarrierKind::reduce_full: return 2 + kTurns + 4 * consumers;
  case BarrierKind::copy: return kLastNamedBarrier;
  }
  llvm_unreachable("unknown barrier kind");
}

/// A constant consumer index must name one of the consumer warpgroups (its
/// barrier id would be another's, or past the 16 the hardware has).
LogicalResult fa3::hopper::verifyConsumerIndex(Operation *op, Value consumer,
                                               int64_t consumers) {
  APInt c;
  if (matchPattern(consumer, m_ConstantInt(&c)) &&
      (c.isNegative() || c.getSExtValue() >= consumers))
    return op->emitOpError("consumer ")
           << c.getSExtValue() << " is not one of the " << consumers
           << " consumer warpgroups";
  return success();
}

namespace {

/// Checks what the named-barrier ops share: the turns are between two
/// consumers, bar.sync counts whole warps, and the consumer exists.
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
  const int64_t perConsumer = op.getKind() == BarrierKind::transpose ||
                                      op.getKind() == BarrierKind::copy
                                  ? 1
                                  : consumers;
  const int64_t last = namedBarrierBase(op.getKind(), consumers) + perConsumer - 1;
  if (last > kLastNamedBarrier)
    return op.emitOpError("barrier kind ")
           << stringifyBarrierKind(op.getKind()) << " with " << consumers
           << " consumer warpgroups needs barrier ids up to " << last
           << "; the hardware has 0 to " << kLastNamedBarrier;
  return verifyConsumerIndex(op, op.getConsumer(), consumers);
}
} // namespace

LogicalResult NamedBarrierSyncOp::verify() { return verifyNamedBarrier(*this); }
LogicalResult NamedBarrierArriveOp::verify() { return verifyNamedBarrier(*this); }
LogicalResult WarpgroupAnyOp::verify() {
  return verifyConsumerIndex(*this, getConsumer(), getConsumers());
}

//===----------------------------------------------------------------------===//
// WarpSpecializeOp
//===----------------------------------------------------------------------===//

// hopper.warp_specialize producer regs P {...} consumers(%c of N) regs C {...}
ParseResult WarpSpecializeOp::parse(OpAsmParser &parser, OperationState &state) {
  Builder &b = parser.getBuilder();
  int64_t producerRegs = 0, consumers = 0, consumerRegs = 0;
  OpAsmParser::Argument consumer;
  consumer.type = b.getI32Type();
  Region *producer = state.addRegion();
  Region *consumerRegion = state.addRegion();
  if (parser.parseKeyword("producer") || parser.parseKeyword("regs") ||
      parser.parseInteger(producerRegs) || parser.parseRegion(*producer) ||
      parser.parseKeyword("consumers") || parser.parseLParen() ||
      parser.parseArgument(consumer) || parser.parseKeyword("of") ||
      parser.parseInteger(consumers) || parser.parseRParen() ||
      parser.parseKeyword("regs") || parser.parseInteger(consumerRegs) ||
      parser.parseRegion(*consumerRegion, {consumer}) ||
      parser.parseOptionalAttrDict(state.attributes))
    return failure();
  state.addAttribute(getProducerRegsAttrName(state.name),
                     b.getI64IntegerAttr(producerRegs));
  state.addAttribute(getConsumerRegsAttrName(state.name),
                     b.getI64IntegerAttr(consumerRegs));
  state.addAttribute(getConsumersAttrName(state.name),
                     b.getI64IntegerAttr(consumers));
  ensureTerminator(*producer, b, state.location);
  ensureTerminator(*consumerRegion, b, state.location);
  return success();
}

void WarpSpecializeOp::print(OpAsmPrinter &p) {
  p << " producer regs " << getProducerRegs() << " ";
  p.printRegion(getProducer(), /*printEntryBlockArgs=*/false,
                /*printBlockTerminators=*/false);
  p << " consumers(" << getConsumer().getArgument(0) << " of "
    << getConsumers() << ") regs " << getConsumerRegs() << " ";
  p.printRegion(getConsumer(), /*printEntryBlockArgs=*/false,
                /*printBlockTerminators=*/false);
  p.printOptionalAttrDict((*this)->getAttrs(),
                          {getProducerRegsAttrName(), getConsumerRegsAttrName(),
                           getConsumersAttrName()});
}

LogicalResult WarpSpecializeOp::verify() {
  if (!getProducer().getArguments().empty())
    return emitOpError("the producer region takes no arguments");
  if (getConsumer().getNumArguments() != 1 ||
      !getConsumer().getArgument(0).getType().isInteger(32))
    return emitOpError("the consumer region takes one i32 argument, its "
                       "consumer index");
  // setmaxnreg takes multiples of 8 (PTX ISA: setmaxnreg).
  for (int64_t regs : {getProducerRegs(), getConsumerRegs()})
    if (regs % 8 != 0)
      return emitOpError("register budgets must be multiples of 8 "
                         "(setmaxnreg), got ")
             << regs;
  for (int64_t regs : {getProducerRegs(), getConsumerRegs()})
    if (regs < 24 || regs > 256)
      return emitOpError("register budgets must be 24 to 256 (setmaxnreg), "
                         "got ")
             << regs;
  // Within the CTA's allocation at launch (launchRegistersPerThread), with
  // as many CTAs a SM as the kernel asks to be resident (nvvm.minctasm of
  // the function around it; 1 without).
  int64_t ctasPerSm = 1;
  for (Operation *p = (*this)->getParentOp(); p; p = p->getParentOp())
    if (auto m = p->getAttrOfType<IntegerAttr>("nvvm.minctasm")) {
      ctasPerSm = std::max<int64_t>(1, m.getInt());
      break;
    }
  const int64_t threads = kWarpgroupThreads * (1 + getConsumers());
  const int64_t launch =
      launchRegistersPerThread(threads, ctasPerSm) * threads;
  int64_t total = kWarpgroupThreads *
                  (getProducerRegs() + getConsumers() * getConsumerRegs());
  if (total > launch)
    return emitOpError("128 x (")
           << getProducerRegs() << " + " << getConsumers() << " x "
           << getConsumerRegs() << ") = " << total
           << " registers: more than the CTA's " << launch << " at launch ("
           << threads << " threads x " << launch / threads
           << (ctasPerSm > 1 ? ", " + std::to_string(ctasPerSm) +
                                   " CTAs a SM (nvvm.minctasm)"
                             : std::string())
           << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// Roles in the producer warpgroup
//===----------------------------------------------------------------------===//

/// Whether `op` lies in the producer region of a hopper.warp_specialize.
Region *fa3::hopper::enclosingRole(Operation *op) {
  for (Region *r = op->getParentRegion(); r; r = r->getParentRegion())
    if (isa<WarpSpecializeOp>(r->getParentOp()))
      return r;
  return nullptr;
}

Operation *fa3::hopper::findBefore(Operation *op,
                                   function_ref<bool(Operation *)> match) {
  for (Operation *at = op; at && !isa<WarpSpecializeOp>(at);
       at = at->getParentOp())
    for (Operation *prev = at->getPrevNode(); prev; prev = prev->getPrevNode())
      if (match(prev))
        return prev;
  return nullptr;
}

static LogicalResult verifyInProducer(Operation *op) {
  Region *role = enclosingRole(op);
  if (role &&
      role == &cast<WarpSpecializeOp>(role->getParentOp()).getProducer())
    return success();
  return op->emitOpError("must be inside the producer region of "
                         "hopper.warp_specialize (it names threads of the "
                         "producer warpgroup)");
}

LogicalResult ProducerThreadOp::verify() {
  if (failed(verifyInProducer(*this)))
    return failure();
  auto yield = cast<gpu::YieldOp>(getBody().front().getTerminator());
  if (!llvm::equal(yield.getOperandTypes(), getResultTypes()))
    return emitOpError("yields ")
           << yield.getNumOperands() << " value(s) for "
           << getNumResults() << " result(s) of the same types";
  if (getNumResults() == 0)
    return success();
  // Results reach the lanes of thread 0's warp by a shuffle: that warp,
  // and only it, must run the op (its program's control flow is the
  // warp's, every lane alike).
  auto warp = (*this)->getParentOfType<ProducerWarpsOp>();
  if (!warp || warp.getFirst() != 0 || warp.getCount() != 1 ||
      (*this)->getParentOfType<ProducerThreadOp>())
    return emitOpError("with results must stand in 'hopper.producer_warps' "
                       "of warp 0 alone (first 0 count 1), outside another "
                       "producer_thread: its results go to every lane of "
                       "thread 0's warp");
  return success();
}

LogicalResult WarpUniformOp::verify() {
  // A full-warp shuffle where one lane runs would wait for lanes that never
  // come (hopper-warp-specialize drops the op there).
  if ((*this)->getParentOfType<ProducerThreadOp>())
    return emitOpError("inside hopper.producer_thread, where one lane runs: "
                       "the value is its own");
  return success();
}

// hopper.producer_warps(%w) first F count N {...}
ParseResult ProducerWarpsOp::parse(OpAsmParser &parser,
                                   OperationState &state) {
  Builder &b = parser.getBuilder();
  OpAsmParser::Argument warp;
  warp.type = b.getI32Type();
  int64_t first = 0, count = 0;
  Region *body = state.addRegion();
  if (parser.parseLParen() || parser.parseArgument(warp) ||
      parser.parseRParen() || parser.parseKeyword("first") ||
      parser.parseInteger(first) || parser.parseKeyword("count") ||
      parser.parseInteger(count) || parser.parseRegion(*body, {warp}) ||
      parser.parseOptionalAttrDict(state.attributes))
    return failure();
  state.addAttribute(getFirstAttrName(state.name), b.getI64IntegerAttr(first));
  state.addAttribute(getCountAttrName(state.name), b.getI64IntegerAttr(count));
  ensureTerminator(*body, b, state.location);
  return success();
}

void ProducerWarpsOp::print(OpAsmPrinter &p) {
  p << "(" << getBody().getArgument(0) << ") first " << getFirst()
    << " count " << getCount() << " ";
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false,
                /*printBlockTerminators=*/false);
  p.printOptionalAttrDict((*this)->getAttrs(),
                          {getFirstAttrName(), getCountAttrName()});
}

LogicalResult ProducerWarpsOp::verify() {
  if (getBody().getNumArguments() != 1 ||
      !getBody().getArgument(0).getType().isInteger(32))
    return emitOpError("the region takes one i32 argument, the warp's index "
                       "among the role's warps");
  // A warpgroup has four warps (PTX ISA: warpgroup).
  if (getFirst() + getCount() > kWarpgroupThreads / 32)
    return emitOpError("warps ")
           << getFirst() << " .. " << getFirst() + getCount() - 1
           << " do not lie in the producer warpgroup's 4";
  return verifyInProducer(*this);
}

//===----------------------------------------------------------------------===//
// Tile scheduler
//===----------------------------------------------------------------------===//

/// A schedule's counter: the dynamic one's, none for the static one.
static LogicalResult verifyCounter(Operation *op, TileSchedule schedule,
                                   Value counter) {
  bool dynamic = schedule == TileSchedule::dynamic;
  if (dynamic && !counter)
    return op->emitOpError(
        "the dynamic schedule takes its tiles from a counter");
  if (!dynamic && counter)
    return op->emitOpError("the static schedule has no counter");
  return success();
}

/// The scheduler's claims and reset are one thread's: inside a
/// hopper.warp_specialize, in a ring fill (which hopper-warp-specialize
/// gives the producer thread) or the producer thread itself. (Every
/// consumer thread would otherwise claim a tile of its own and count
/// itself done.)
static LogicalResult verifyOneThread(Operation *op) {
  if (!enclosingRole(op) || op->getParentOfType<RingFillOp>() ||
      op->getParentOfType<ProducerThreadOp>())
    return success();
  return op->emitOpError("must stand in a hopper.ring.fill or "
                         "hopper.producer_thread: one thread claims the "
                         "tiles and counts itself done");
}

LogicalResult TileNextOp::verify() {
  if (failed(verifyOneThread(*this)))
    return failure();
  return verifyCounter(*this, getSchedule(), getCounter());
}

LogicalResult TileClaimOp::verify() {
  if (failed(verifyOneThread(*this)))
    return failure();
  return verifyCounter(*this, getSchedule(), getCounter());
}

LogicalResult TileCounterResetOp::verify() { return verifyOneThread(*this); }

/// Sections order the m-blocks across heads; without longest_first the
/// order within a section would be the plain one, for which the kernels
/// keep m-blocks fastest (one head's K/V at a time in L2). The section
/// size and the pair count come together (the generic form could give one
/// alone), and a constant size is at least 1.
LogicalResult TileCoordsOp::verify() {
  if (!getSectionPairs() != !getPairs())
    return emitOpError("sections need both the section size and the pair "
                       "count");
  APInt n;
  if (getSectionPairs() && matchPattern(getSectionPairs(), m_ConstantInt(&n)) &&
      n.getSExtValue() < 1)
    return emitOpError("sections of ") << n.getSExtValue()
                                         << " pairs: at least 1";
  return success();
}

#define GET_OP_CLASSES
#include "fa3/Dialect/Hopper/IR/HopperOps.cpp.inc"
