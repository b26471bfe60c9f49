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


WAIT_S = "WARPGROUP.DEPBAR.LE gsb0, 0x1"
WAIT_PV = "WARPGROUP.DEPBAR.LE gsb0, 0x0"
EXP = "MUFU.EX2 R24, R24"


def test_exps_between_the_waits_count_as_beside_pv():
    body = loop(per_hgmma_filler=2) + [WAIT_S] + [EXP] * 64 + [WAIT_PV, "FMUL R88, R88, R2"]
    assert sass.exps_beside_pv(sass.instructions(fake_sass(body))) == 64


def test_hoisted_pv_wait_leaves_no_exps_beside_pv():
    # what ptxas does without the rescale branch: the P V wait right after
    # the S wait, the softmax after both
    body = loop(per_hgmma_filler=2) + [WAIT_S, "FMNMX R2, R24, R25, !PT", WAIT_PV] + [EXP] * 64
    assert sass.exps_beside_pv(sass.instructions(fake_sass(body))) == 0


def test_facts_beside_the_cubin(tmp_path):
    (tmp_path / "k.facts").write_text("fa3-kernel-facts 1\nblock_n 128\nlazy_rescale 1\n")
    assert sass.read_facts(tmp_path / "k.cubin")["lazy_rescale"] == "1"
    assert sass.read_facts(tmp_path / "missing.cubin") == {}


def test_addresses_match_instructions():
    text = fake_sass(["IMAD R0, R1, R2, RZ", SS, "EXIT"])
    assert len(sass.addresses(text)) == len(sass.instructions(text)) == 3
    assert sass.addresses(text) == [0x0, 0x10, 0x20]


QG = "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR20], R24"


def kv_loop_sass():
    """A kv loop (0x20 .. its back-edge at 0x50) with two spill
    instructions in it, one before and one after it, and the two backward
    jumps that are not loops: a retry stub's wait on itself (no wgmma) and
    its unconditional return into the code."""
    return fake_sass([
        "MOV R1, R2",
        "LDL R3, [R1]",            # before the loop
        QG,                        # 0x20: the loop's head
        "STL [R1], R4",
        "@!P1 LDL R5, [R1+0x4]",
        "@P0 BRA 0x20",            # the back-edge
        "BAR.SYNC.DEFER_BLOCKING 0x1, 0x100",
        "@!P0 BRA 0x70",           # a retry stub spinning on itself
        "BRA 0x20",                # and returning: not a loop
        "STL [R1], R6",            # after
    ])


def test_wgmma_loop_is_the_conditional_back_edge():
    text = kv_loop_sass()
    insts, addrs = sass.instructions(text), sass.addresses(text)
    assert sass.wgmma_loops(insts, addrs) == [(2, 5)]
    assert sass.local_memory_in_wgmma_loops(insts, addrs) == 2
    assert sum(sass.is_local(i) for i in insts) == 4


def test_innermost_wgmma_loop_only():
    """A tile loop around the kv loop: the kv loop's spills count, the
    tile loop's other ones not."""
    text = fake_sass([
        "MOV R1, R2",              # 0x00: the tile loop's head
        "STL [R1], R4",            # in the tile loop only
        QG,                        # 0x20: the kv loop's head
        "LDL R5, [R1]",
        "@P0 BRA 0x20",            # kv back-edge
        "@P1 BRA 0x0",             # tile back-edge
    ])
    insts, addrs = sass.instructions(text), sass.addresses(text)
    assert sass.wgmma_loops(insts, addrs) == [(2, 4)]
    assert sass.local_memory_in_wgmma_loops(insts, addrs) == 1


def test_no_wgmma_no_loop():
    text = fake_sass(["MOV R1, R2", "LDL R3, [R1]", "@P0 BRA 0x0"])
    insts, addrs = sass.instructions(text), sass.addresses(text)
    assert sass.wgmma_loops(insts, addrs) == []
    assert sass.local_memory_in_wgmma_loops(insts, addrs) == 0


def test_loops_stay_in_their_function():
    """Two functions in one cubin: a branch to 0x20 in the second is the
    second's loop, not the first's instruction at 0x20."""
    first = fake_sass(["MOV R1, R2", "LDL R3, [R1]", "STL [R1], R4", "EXIT"])
    second = fake_sass(["MOV R1, R2", QG, "LDL R5, [R1]", "@P0 BRA 0x10"])
    text = first + "\n" + second.replace("Function : k", "Function : k2")
    insts, addrs = sass.instructions(text), sass.addresses(text)
    assert sass.wgmma_loops(insts, addrs) == [(5, 7)]
    assert sass.local_memory_in_wgmma_loops(insts, addrs) == 1


def test_fp8_loop_batch_by_register_a():
    """FP8's P V (QGMMA) has no .tnspB: its register A marks the RS form."""
    qs = "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR20], R24"
    qr = "QGMMA.64x128x32.F32.E4M3.E4M3 R136, R200, gdesc[UR8], R136"
    assert not sass.is_rs(qs) and sass.is_rs(qr) and sass.is_rs(RS) and not sass.is_rs(SS)
    body = ["BAR.SYNC.DEFER_BLOCKING R0, 0x100"] + [qs] * 4 + [qr] * 4
    assert sass.loop_batch(sass.instructions(fake_sass(body))) == (8, 8)
    # S alone is no loop batch
    assert sass.loop_batch(sass.instructions(fake_sass([qs] * 4))) is None


def test_fp8_q_in_registers_loop_batch():
    """FP8 head dim 128 with Q in registers: S and P V are both RS; S's
    first k-step starts from zero (RZ, !UPT), P V accumulates into O."""
    s0 = "QGMMA.64x128x32.F32.E4M3.E4M3 R24, R164, gdesc[UR20], RZ, !UPT"
    s1 = "QGMMA.64x128x32.F32.E4M3.E4M3 R24, R160, gdesc[UR24], R24"
    pv = "QGMMA.64x128x32.F32.E4M3.E4M3 R88, R152, gdesc[UR8], R88"
    body = ["BAR.SYNC.DEFER_BLOCKING R0, 0x100", s0] + [s1] * 3 + [pv] * 4
    assert sass.loop_batch(sass.instructions(fake_sass(body))) == (8, 8)
    # S alone (its four k-steps, all RS) is no loop batch, nor P V alone
    assert sass.loop_batch(sass.instructions(fake_sass([s0] + [s1] * 3))) is None
    assert sass.loop_batch(sass.instructions(fake_sass([pv] * 4))) is None


def test_cuobjdump_that_cannot_run_is_a_failure_line(tmp_path, capsys):
    """A --cuobjdump that is not an executable (a cubin given in its place, a
    wrong path): a FAIL line naming it, exit status 1, no traceback."""
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF")
    assert sass.main(["--cuobjdump", str(tmp_path / "none"), str(cubin)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"FAIL {cubin}: cannot run cuobjdump") and "none" in out
