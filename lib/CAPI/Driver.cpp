//===- Driver.cpp - running pipelines from C ------------------------------===//

#include "fa3-c/Driver.h"
#include "fa3-c/Registration.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <cstdlib>
#include <cstring>
#include <string>

using namespace mlir;

char *fa3OperationToString(MlirOperation op, bool generic) {
  std::string s;
  llvm::raw_string_ostream os(s);
  OpPrintingFlags flags;
  if (generic)
    flags.printGenericOpForm();
  unwrap(op)->print(os, flags);
  char *out = static_cast<char *>(std::malloc(s.size() + 1));
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

void fa3StringDestroy(char *str) { std::free(str); }

MlirLogicalResult fa3RunPassPipeline(MlirOperation cop, const char *pipeline) {
  fa3RegisterAllPasses();
  Operation *op = unwrap(cop);
  // Accept both "p1,p2" and "builtin.module(p1,p2)" for an op of that name.
  std::string text = pipeline ? pipeline : "";
  std::string anchor = op->getName().getStringRef().str() + "(";
  if (text.rfind(anchor, 0) == 0 && !text.empty() && text.back() == ')')
    text = text.substr(anchor.size(), text.size() - anchor.size() - 1);
  std::string err;
  llvm::raw_string_ostream os(err);
  PassManager pm(op->getContext(), op->getName().getStringRef());
  if (failed(parsePassPipeline(text, pm, os))) {
    emitError(op->getLoc()) << "invalid pass pipeline '" << pipeline
                            << "': " << err;
    return wrap(failure());
  }
  return wrap(pm.run(op));
}
