"""The ctypes binding: parse, verify, run pipelines, print, and errors with
their diagnostics."""
import pytest

from fa3.ir import Context, Fa3Error
from fa3.spec import flash_attention_func


def test_parse_print_round_trip():
    with Context() as ctx:
        text = flash_attention_func("f", 1, 4, 2, 64, 80, 32, dtype="bf16",
                                    causal=True, softcap=5.0)
        mod = ctx.parse(text)
        mod.verify()
        printed = str(mod)
        assert "attn.flash_attention" in printed
        assert "causal softcap(5.000000e+00)" in printed
        assert str(ctx.parse(printed)) == printed


def test_verifier_error_has_message_and_location():
    with Context() as ctx:
        text = flash_attention_func("f", 1, 3, 2, 64, 64, 32)
        with pytest.raises(Fa3Error) as e:
            ctx.parse(text)
        assert "query heads (3) must be a multiple of kv heads (2)" in str(e.value)
        assert "error:" in str(e.value) and ":2:" in str(e.value)


def test_syntax_error():
    with Context() as ctx:
        with pytest.raises(Fa3Error) as e:
            ctx.parse("func.func @f( {")
        assert "error" in str(e.value)


def test_pipeline_runs_and_lowers():
    with Context() as ctx:
        mod = ctx.parse(flash_attention_func("f", 1, 2, 2, 40, 40, 16, causal=True))
        mod.run_pipeline("attn-tile{block-m=16 block-n=16}")
        text = str(mod)
        assert "attn.tile_update" in text and "masked" in text
        mod.run_pipeline("builtin.module(attn-lower-tiles-to-loops)")
        assert "attn.tile_update" not in str(mod)


def test_bad_pipeline_is_reported():
    with Context() as ctx:
        mod = ctx.parse(flash_attention_func("f", 1, 2, 2, 40, 40, 16))
        with pytest.raises(Fa3Error) as e:
            mod.run_pipeline("no-such-pass")
        assert "invalid pass pipeline" in str(e.value)


def test_pass_failure_is_reported():
    text = """func.func @f(%q: tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32> {
  %r = attn.flash_attention ins(%q, %q, %q : tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) outs(%q : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  return %r : tensor<1x1x8x8xf32>
}"""
    with Context() as ctx:
        mod = ctx.parse(text)
        with pytest.raises(Fa3Error) as e:
            mod.run_pipeline("attn-tile")
        assert "needs the memref form" in str(e.value)


def test_deep_nesting_is_refused_not_a_crash():
    # MLIR's parser recurses per level: 3,000 nested regions overflowed the
    # stack of the process that called it.
    n = 3000
    text = ('func.func @f() {\n' + '"test.op"() ({' * n + '}) : () -> ()' * n +
            '\nreturn\n}\n')
    with Context() as ctx:
        with pytest.raises(Fa3Error) as e:
            ctx.parse(text, name="deep.mlir")
        assert "deep.mlir:0:0: error: fa3ModuleCreateParse: brackets nested 6001 levels deep" \
            in str(e.value)


def test_parse_errors_name_the_file(tmp_path):
    f = tmp_path / "bad.mlir"
    f.write_text("func.func @f() {\n  %x = arith.constant : i32\n}\n")
    with Context() as ctx:
        with pytest.raises(Fa3Error) as e:
            ctx.parse_file(f)
        assert str(f) + ":2:" in str(e.value)
        with pytest.raises(Fa3Error) as e:
            ctx.parse("func.func @f( {")
        assert "<input>:1:" in str(e.value)
