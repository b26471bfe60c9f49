//===- Errors.h - the error contract of the fa3 C API (internal) -*- C++ -*-===//
//
// fa3-c/Support.h states the contract; these helpers keep it: the
// thread-local last error, misuse reported where a context is reachable, the
// first error diagnostic of a call captured as its last error, and registries
// of the live objects whose double destroy must be harmless.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_LIB_CAPI_ERRORS_H
#define FA3_LIB_CAPI_ERRORS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <mutex>
#include <string>
#include <unordered_set>

namespace fa3::capi {

/// Clears the last error: called on entry by every function that can fail.
void clearLastError();
/// Sets the last error to "fn: msg".
void setLastError(llvm::StringRef fn, const llvm::Twine &msg);
/// Misuse without a context: only the last error.
inline void misuse(llvm::StringRef fn, const llvm::Twine &msg) {
  setLastError(fn, msg);
}

/// Misuse with a context: an error diagnostic at `loc` and the last error.
void misuseAt(llvm::StringRef fn, mlir::Location loc, const llvm::Twine &msg);

/// While alive, records the first error diagnostic of `ctx` and passes every
/// diagnostic on to the handlers registered before it (or MLIR's default).
class FirstError {
public:
  explicit FirstError(mlir::MLIRContext *ctx);
  ~FirstError();
  FirstError(const FirstError &) = delete;
  FirstError &operator=(const FirstError &) = delete;
  /// The call failed: the last error becomes "fn: <first error>" unless the
  /// call set a more specific one already.
  void failed(llvm::StringRef fn);

private:
  mlir::MLIRContext *ctx;
  mlir::DiagnosticEngine::HandlerID id;
  std::mutex mutex; // passes may emit from worker threads
  std::string first;
};

/// The objects of type T this library handed out and has not destroyed:
/// a stale pointer is refused instead of being freed twice or read.
template <typename T> class LiveSet {
public:
  void add(T *p) {
    std::lock_guard<std::mutex> g(mutex);
    live.insert(p);
  }
  bool contains(const T *p) {
    std::lock_guard<std::mutex> g(mutex);
    return live.count(const_cast<T *>(p)) != 0;
  }
  /// Whether p was live (and is no longer).
  bool remove(T *p) {
    std::lock_guard<std::mutex> g(mutex);
    return live.erase(p) != 0;
  }

private:
  std::mutex mutex;
  std::unordered_set<T *> live;
};

} // namespace fa3::capi

#endif // FA3_LIB_CAPI_ERRORS_H
