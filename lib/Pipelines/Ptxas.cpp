//===- Ptxas.cpp - finding and running ptxas ------------------------------===//
//
// The C API assembles cubins itself rather than through
// gpu-module-to-binary: the PTX is already at hand, ptxas then runs once
// per kernel with a time limit, and what comes back is checked to be a
// CUDA ELF before anyone loads it.
//
//===----------------------------------------------------------------------===//

#include "fa3/Pipelines/Ptxas.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <optional>

using namespace llvm;

std::string fa3::defaultToolkit() {
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *v = std::getenv(var); v && *v)
      return v;
  if (sys::fs::exists("/usr/local/cuda/bin/ptxas"))
    return "/usr/local/cuda";
  return "";
}

std::string fa3::findPtxas(StringRef toolkit) {
  std::string tk = toolkit.empty() ? defaultToolkit() : toolkit.str();
  if (!tk.empty()) {
    std::string path = tk + "/bin/ptxas";
    return sys::fs::can_execute(path) ? path : "";
  }
  if (ErrorOr<std::string> p = sys::findProgramByName("ptxas"))
    return *p;
  return "";
}

namespace {
/// A temporary file removed when this goes out of scope.
struct TempFile {
  SmallString<128> path;
  std::error_code create(StringRef suffix) {
    return sys::fs::createTemporaryFile("fa3-ptxas", suffix, path);
  }
  ~TempFile() {
    if (!path.empty())
      sys::fs::remove(path);
  }
};

/// A relocatable or executable ELF for NVIDIA GPUs (EM_CUDA = 190).
bool isCudaElf(StringRef bytes) {
  if (bytes.size() < 20 || !bytes.starts_with("\x7f" "ELF"))
    return false;
  auto machine = static_cast<uint16_t>(
      static_cast<uint8_t>(bytes[18]) | (static_cast<uint8_t>(bytes[19]) << 8));
  return machine == 190;
}
} // namespace

bool fa3::assembleCubin(StringRef ptxas, StringRef ptx, StringRef chip,
                        unsigned timeoutSeconds, std::string &cubin,
                        std::string &error) {
  TempFile in, out, log;
  if (std::error_code ec = in.create("ptx"); ec)
    return error = "cannot create a temporary file: " + ec.message(), false;
  if (std::error_code ec = out.create("cubin"); ec)
    return error = "cannot create a temporary file: " + ec.message(), false;
  if (std::error_code ec = log.create("log"); ec)
    return error = "cannot create a temporary file: " + ec.message(), false;
  {
    std::error_code ec;
    raw_fd_ostream os(in.path, ec);
    if (ec)
      return error = "cannot write " + in.path.str().str() + ": " + ec.message(),
             false;
    os << ptx;
  }
  // The flags gpu-module-to-binary passes (nvvm-attach-target O=3), so a
  // cubin is the same either way.
  std::string arch = chip.str();
  SmallVector<StringRef> args{ptxas, "-arch", arch, in.path, "-o", out.path,
                              "--opt-level", "3"};
  std::optional<StringRef> redirects[] = {std::nullopt, log.path.str(),
                                          log.path.str()};
  std::string execError;
  bool failed = false;
  int rc = sys::ExecuteAndWait(ptxas, args, /*Env=*/std::nullopt, redirects,
                               timeoutSeconds, /*MemoryLimit=*/0, &execError,
                               &failed);
  std::string messages;
  if (ErrorOr<std::unique_ptr<MemoryBuffer>> b = MemoryBuffer::getFile(log.path))
    messages = (*b)->getBuffer().rtrim().str();
  if (failed || rc != 0) {
    error = (ptxas + " ").str();
    // -1: not started; -2: killed by a signal or by the time limit.
    if (rc == -2)
      error += "did not finish (" + execError + "; limit " +
               std::to_string(timeoutSeconds) + " s)";
    else if (failed || rc < 0)
      error += "could not run: " + execError;
    else
      error += "failed (exit status " + std::to_string(rc) + ")";
    if (!messages.empty())
      error += ":\n" + messages;
    return false;
  }
  ErrorOr<std::unique_ptr<MemoryBuffer>> bin = MemoryBuffer::getFile(out.path);
  if (!bin)
    return error = (ptxas + " wrote no cubin").str(), false;
  if (!isCudaElf((*bin)->getBuffer()))
    return error = (ptxas + " wrote " + Twine((*bin)->getBufferSize()) +
                    " bytes that are not a CUDA ELF object")
                       .str(),
           false;
  cubin = (*bin)->getBuffer().str();
  return true;
}
