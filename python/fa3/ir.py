"""Parse, verify, transform and print attention IR through our C API."""
import ctypes

from . import _capi


class Fa3Error(RuntimeError):
    """An MLIR error; the message holds the diagnostics with locations."""


class Context:
    """An MLIR context with every dialect FA3-MLIR uses, and its diagnostics."""

    def __init__(self):
        self._lib = _capi.lib()
        self._ctx = self._lib.fa3ContextCreate()
        self._log = self._lib.fa3DiagnosticLogAttach(self._ctx)

    def diagnostics(self) -> str:
        return self._lib.fa3DiagnosticLogText(self._log).decode()

    def _take_diagnostics(self) -> str:
        text = self.diagnostics()
        self._lib.fa3DiagnosticLogClear(self._log)
        return text

    def parse(self, text: str, name: str = "<input>") -> "Module":
        """Parses and verifies a module (diagnostics located in `name`);
        raises Fa3Error with the diagnostics. Input nested deeper than 1000
        brackets is refused (MLIR's parser would overflow the stack)."""
        self._take_diagnostics()
        mod = self._lib.fa3ModuleCreateParse(
            self._ctx, _capi.MlirStringRef.of(text.encode()),
            _capi.check_str("Context.parse", "name", name))
        if mod.is_null():
            raise Fa3Error(self._take_diagnostics() or "failed to parse module")
        return Module(self, mod)

    def parse_file(self, path) -> "Module":
        """Parses the IR file at `path`; diagnostics name the file."""
        with open(path, encoding="utf-8") as f:
            return self.parse(f.read(), name=str(path))

    def close(self):
        if self._ctx is not None:
            self._lib.fa3DiagnosticLogDestroy(self._log)
            self._lib.mlirContextDestroy(self._ctx)
            self._ctx = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Module:
    def __init__(self, context: Context, handle):
        self.context = context
        self._mod = handle
        self._lib = context._lib

    @property
    def operation(self):
        return self._lib.mlirModuleGetOperation(self._mod)

    def verify(self):
        self.context._take_diagnostics()
        if not self._lib.mlirOperationVerify(self.operation):
            raise Fa3Error(self.context._take_diagnostics())

    def run_pipeline(self, pipeline: str) -> "Module":
        """Runs a pass pipeline in place (fa3-opt's syntax), e.g.
        'attn-cpu-reference-pipeline' or 'attn-tile{block-m=64 block-n=32}'."""
        self.context._take_diagnostics()
        res = self._lib.fa3RunPassPipeline(
            self.operation, _capi.check_str("Module.run_pipeline", "pipeline", pipeline))
        if not res.ok():
            raise Fa3Error(self.context._take_diagnostics())
        return self

    def to_string(self, generic=False) -> str:
        p = self._lib.fa3OperationToString(self.operation, generic)
        try:
            return ctypes.string_at(p).decode()
        finally:
            self._lib.fa3StringDestroy(p)

    def __str__(self):
        return self.to_string()
