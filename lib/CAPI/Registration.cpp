//===- Registration.cpp - registering FA3-MLIR through the C API ----------===//

#include "fa3-c/Registration.h"
#include "fa3-c/Support.h"
#include "fa3/InitAll.h"

#include "Errors.h"

#include "mlir/CAPI/IR.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <mutex>
#include <string>
#include <utility>

using namespace mlir;
using namespace fa3::capi;

//===----------------------------------------------------------------------===//
// The error contract (fa3-c/Support.h)
//===----------------------------------------------------------------------===//

// Per thread: concurrent hosts must not read each other's errors.
static thread_local std::string lastError;

const char *fa3LastError(void) { return lastError.c_str(); }

void fa3::capi::clearLastError() { lastError.clear(); }

void fa3::capi::setLastError(llvm::StringRef fn, const llvm::Twine &msg) {
  lastError = (fn + ": " + msg).str();
}

void fa3::capi::misuseAt(llvm::StringRef fn, Location loc,
                         const llvm::Twine &msg) {
  emitError(loc) << fn << ": " << msg;
  setLastError(fn, msg);
}

FirstError::FirstError(MLIRContext *ctx) : ctx(ctx) {
  id = ctx->getDiagEngine().registerHandler([this](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error) {
      std::lock_guard<std::mutex> g(mutex);
      if (first.empty())
        first = d.str();
    }
    // Not handled: the host's handlers (or MLIR's default) still get it.
    return failure();
  });
}

FirstError::~FirstError() { ctx->getDiagEngine().eraseHandler(id); }

void FirstError::failed(llvm::StringRef fn) {
  if (!lastError.empty())
    return; // the call said something more specific already
  std::lock_guard<std::mutex> g(mutex);
  setLastError(fn, first.empty() ? std::string("failed (no error diagnostic)")
                                 : first);
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

void fa3RegisterAllDialects(MlirDialectRegistry registry) {
  clearLastError();
  if (!registry.ptr)
    return misuse(__func__, "the registry is null");
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

//===----------------------------------------------------------------------===//
// Diagnostic log
//===----------------------------------------------------------------------===//

struct Fa3DiagnosticLog {
  MLIRContext *ctx; // null once the context is destroyed
  DiagnosticEngine::HandlerID id;
  std::string text;
};

namespace {
/// Lives inside the log's handler. The context destroys its handlers with
/// itself, so this destructor is how the log learns that its context is gone
/// (mlirContextDestroy is not ours to hook); eraseHandler runs it too.
class ContextGone {
public:
  explicit ContextGone(Fa3DiagnosticLog *log) : log(log) {}
  ContextGone(ContextGone &&o) noexcept : log(std::exchange(o.log, nullptr)) {}
  ContextGone(const ContextGone &) = delete;
  ContextGone &operator=(const ContextGone &) = delete;
  ContextGone &operator=(ContextGone &&) = delete;
  ~ContextGone() {
    if (log)
      log->ctx = nullptr;
  }

private:
  Fa3DiagnosticLog *log;
};
} // namespace

/// Never destroyed: a log destroyed from a host's exit path (a Python
/// finaliser) must not meet a registry that static destruction took away.
static LiveSet<Fa3DiagnosticLog> &liveLogs() {
  static auto *logs = new LiveSet<Fa3DiagnosticLog>;
  return *logs;
}

/// Whether `log` may be used; sets the last error if not.
static bool checkLog(const char *fn, const Fa3DiagnosticLog *log) {
  if (!log) {
    misuse(fn, "the log is NULL");
    return false;
  }
  if (!liveLogs().contains(log)) {
    misuse(fn, "not a live Fa3DiagnosticLog (destroyed already?)");
    return false;
  }
  return true;
}

/// "file:line:col" for a file location (found through names, call sites and
/// fused locations), as compilers print it; MLIR's own form otherwise.
static void printLocation(llvm::raw_ostream &os, Location loc) {
  if (auto file = loc->findInstanceOf<FileLineColLoc>()) {
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn();
    return;
  }
  os << loc;
}

Fa3DiagnosticLog *fa3DiagnosticLogAttach(MlirContext ctx) {
  clearLastError();
  if (mlirContextIsNull(ctx)) {
    misuse(__func__, "the context is null");
    return nullptr;
  }
  auto *log = new Fa3DiagnosticLog{unwrap(ctx), 0, {}};
  log->id = log->ctx->getDiagEngine().registerHandler(
      [log, gone = ContextGone(log)](Diagnostic &d) {
        llvm::raw_string_ostream os(log->text);
        printLocation(os, d.getLocation());
        os << ": ";
        switch (d.getSeverity()) {
        case DiagnosticSeverity::Error: os << "error: "; break;
        case DiagnosticSeverity::Warning: os << "warning: "; break;
        case DiagnosticSeverity::Note: os << "note: "; break;
        case DiagnosticSeverity::Remark: os << "remark: "; break;
        }
        os << d << "\n";
        for (Diagnostic &note : d.getNotes()) {
          printLocation(os, note.getLocation());
          os << ": note: " << note << "\n";
        }
        return success();
      });
  liveLogs().add(log);
  return log;
}

const char *fa3DiagnosticLogText(Fa3DiagnosticLog *log) {
  clearLastError();
  if (!checkLog(__func__, log))
    return nullptr;
  return log->text.c_str();
}

void fa3DiagnosticLogClear(Fa3DiagnosticLog *log) {
  clearLastError();
  if (checkLog(__func__, log))
    log->text.clear();
}

void fa3DiagnosticLogDestroy(Fa3DiagnosticLog *log) {
  clearLastError();
  if (!log)
    return;
  if (!liveLogs().remove(log))
    return misuse(__func__, "not a live Fa3DiagnosticLog (destroyed twice?)");
  if (log->ctx) // its context is alive: stop writing into the log
    log->ctx->getDiagEngine().eraseHandler(log->id);
  delete log;
}
