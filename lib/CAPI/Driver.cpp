//===- Driver.cpp - running pipelines from C ------------------------------===//

#include "fa3-c/Driver.h"
#include "fa3-c/Registration.h"

#include "Errors.h"
#include "fa3/Support/InputLimits.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <cstdlib>
#include <cstring>
#include <string>

using namespace mlir;
using namespace fa3::capi;

char *fa3OperationToString(MlirOperation op, bool generic) {
  clearLastError();
  if (mlirOperationIsNull(op)) {
    misuse(__func__, "the operation is null");
    return nullptr;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  OpPrintingFlags flags;
  if (generic)
    flags.printGenericOpForm();
  unwrap(op)->print(os, flags);
  char *out = static_cast<char *>(std::malloc(s.size() + 1));
  if (!out) {
    misuse(__func__, "out of memory");
    return nullptr;
  }
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

void fa3StringDestroy(char *str) { std::free(str); }

MlirModule fa3ModuleCreateParse(MlirContext cctx, MlirStringRef ctext,
                                const char *name) {
  clearLastError();
  if (mlirContextIsNull(cctx)) {
    misuse(__func__, "the context is null");
    return MlirModule{nullptr};
  }
  MLIRContext *ctx = unwrap(cctx);
  if (!ctext.data && ctext.length) {
    misuse(__func__, "the text is NULL");
    return MlirModule{nullptr};
  }
  llvm::StringRef text(ctext.data ? ctext.data : "", ctext.length);
  std::string file = name ? name : "<input>";
  std::string why = fa3::checkInputLimits(text);
  if (!why.empty()) {
    misuseAt(__func__, FileLineColLoc::get(ctx, file, 0, 0), why);
    return MlirModule{nullptr};
  }
  FirstError firstError(ctx);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, ctx, file);
  if (!module) {
    firstError.failed(__func__);
    return MlirModule{nullptr};
  }
  return wrap(module.release());
}

MlirLogicalResult fa3RunPassPipeline(MlirOperation cop, const char *pipeline) {
  clearLastError();
  if (mlirOperationIsNull(cop)) {
    misuse(__func__, "the operation is null");
    return wrap(failure());
  }
  Operation *op = unwrap(cop);
  if (!pipeline) {
    misuseAt(__func__, op->getLoc(), "the pipeline is NULL");
    return wrap(failure());
  }
  fa3RegisterAllPasses();
  FirstError firstError(op->getContext());
  // Accept both "p1,p2" and "builtin.module(p1,p2)" for an op of that name.
  std::string text = pipeline;
  std::string anchor = op->getName().getStringRef().str() + "(";
  if (text.rfind(anchor, 0) == 0 && !text.empty() && text.back() == ')')
    text = text.substr(anchor.size(), text.size() - anchor.size() - 1);
  std::string err;
  llvm::raw_string_ostream os(err);
  PassManager pm(op->getContext(), op->getName().getStringRef());
  if (failed(parsePassPipeline(text, pm, os))) {
    emitError(op->getLoc()) << "invalid pass pipeline '" << pipeline
                            << "': " << err;
    firstError.failed(__func__);
    return wrap(failure());
  }
  if (failed(pm.run(op))) {
    firstError.failed(__func__);
    return wrap(failure());
  }
  return wrap(success());
}
