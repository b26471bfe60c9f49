"""fa3.sass: finding the steady-state wgmma batch in cuobjdump output and
judging how tightly its HGMMAs are issued (synthetic SASS, no CUDA needed)."""

from fa3 import sass


def fake_sass(body):
    """cuobjdump -sass lines for the instruction strings in `body`."""
    out = ["        code for sm_90a", "        Function : k"]
    for i, ins in enumerate(body):
        out.append(f"        /*{16 * i:04x}*/                   {ins} ;"
                   "   /* 0x000000000000000000000000000000 */")
        out.append("                                                  "
                   "/* 0x000fe20000000000 */")
    return "\n".join(out)


SS = "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR20], R24"
RS = "HGMMA.64x128x16.F32.BF16 R88, R180, gdesc[UR8].tnspB, R88"


def loop(per_hgmma_filler):
    body = ["BAR.SYNC.DEFER_BLOCKING R0, 0x100", "WARPGROUP.ARRIVE"]
    for form in [SS] * 8 + [RS] * 8:
        body += ["R2UR UR20, R194"] * per_hgmma_filler + [form]
    return body


def test_parses_instruction_lines_only():
    insts = sass.instructions(fake_sass(["IMAD R0, R1, R2, RZ", SS]))
    assert insts == ["IMAD R0, R1, R2, RZ", SS]


def test_tight_batch_passes():
    # prologue S batch (SS only) must not be taken for the loop batch
    body = [SS] * 8 + ["EXIT"] * 40 + loop(per_hgmma_filler=2)
    n, span = sass.loop_batch(sass.instructions(fake_sass(body)))
    assert n == 16 and span == 16 * 3 - 2
    assert span <= sass.MAX_SPAN_PER_HGMMA * n


def test_descriptor_math_before_every_hgmma_fails():
    n, span = sass.loop_batch(sass.instructions(fake_sass(loop(per_hgmma_filler=6))))
    assert n == 16 and span > sass.MAX_SPAN_PER_HGMMA * n


def test_no_rs_form_is_no_loop_batch():
    assert sass.loop_batch(sass.instructions(fake_sass([SS] * 8))) is None
