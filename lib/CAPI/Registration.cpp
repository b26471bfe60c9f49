//===- Registration.cpp - registering FA3-MLIR through the C API ----------===//

#include "fa3-c/Registration.h"
#include "fa3/InitAll.h"

#include "mlir/CAPI/IR.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <mutex>
#include <string>

using namespace mlir;

void fa3RegisterAllDialects(MlirDialectRegistry registry) {
  fa3::registerAllDialects(*unwrap(registry));
}

void fa3RegisterAllPasses(void) {
  static std::once_flag once;
  std::call_once(once, [] { fa3::registerAllPasses(); });
}

MlirContext fa3ContextCreate(void) {
  DialectRegistry registry;
  fa3::registerAllDialects(registry);
  auto *ctx = new MLIRContext(registry);
  ctx->loadAllAvailableDialects();
  return wrap(ctx);
}

struct Fa3DiagnosticLog {
  MLIRContext *ctx;
  DiagnosticEngine::HandlerID id;
  std::string text;
};

Fa3DiagnosticLog *fa3DiagnosticLogAttach(MlirContext ctx) {
  auto *log = new Fa3DiagnosticLog{unwrap(ctx), 0, {}};
  log->id = log->ctx->getDiagEngine().registerHandler([log](Diagnostic &d) {
    llvm::raw_string_ostream os(log->text);
    os << d.getLocation() << ": ";
    switch (d.getSeverity()) {
    case DiagnosticSeverity::Error: os << "error: "; break;
    case DiagnosticSeverity::Warning: os << "warning: "; break;
    case DiagnosticSeverity::Note: os << "note: "; break;
    case DiagnosticSeverity::Remark: os << "remark: "; break;
    }
    os << d << "\n";
    for (Diagnostic &note : d.getNotes())
      os << note.getLocation() << ": note: " << note << "\n";
    return success();
  });
  return log;
}

const char *fa3DiagnosticLogText(Fa3DiagnosticLog *log) {
  return log->text.c_str();
}

void fa3DiagnosticLogClear(Fa3DiagnosticLog *log) { log->text.clear(); }

void fa3DiagnosticLogDestroy(Fa3DiagnosticLog *log) {
  log->ctx->getDiagEngine().eraseHandler(log->id);
  delete log;
}
