#!/usr/bin/env python3
"""Emit fa_fwd_h128.mlir: a FlashAttention-3-style forward kernel for Hopper (sm_90a)
written in upstream MLIR dialects (gpu, nvvm, llvm, arith, math, scf).

This script is a model of the C++ emitter (convert-attn-to-nvvm): it emits the IR the
way a generator would -- straight-line, fully unrolled fragment code, one SSA value per
accumulator register, constants hoisted to the function entry.  Every number that the
C++ pass will have to compute is a named Python constant below.

Usage: gen_fa_fwd.py > fa_fwd_h128.mlir
"""
import sys

# ----------------------------------------------------------------------------------
# Tile / layout parameters (the C++ pass gets these from the attn op + options).
# ----------------------------------------------------------------------------------
D = 128            # head dim (= Dv)
BM = 128           # rows of Q per CTA (m-block)
BN = 128           # rows of K/V per pipeline stage (kv-block)
STAGES = 2         # K/V ring depth
NCONS = 2          # consumer warpgroups; each owns BM/NCONS = 64 rows
WG_ROWS = BM // NCONS
NTHREADS = 128 * (1 + NCONS)
PRODUCER_REGS = 24
CONSUMER_REGS = 240
ELEM = 2           # bf16 bytes
SW = 128           # swizzle width in bytes (128B swizzle): one TMA box row = 64 bf16
CHUNK = SW // ELEM # 64 elements of D per TMA box / swizzle atom column
NCHUNK = D // CHUNK  # 2 boxes per tile
KSTEP = 16         # wgmma K for bf16
NACC = BN // 2     # f32 accumulator registers per thread for m64nBNk16 (= BN*64/128)
NACC_O = D // 2    # f32 registers of O per thread (m64nDk16)

# Shared memory map (bytes from a 1024-aligned base).  Every tile is NCHUNK boxes of
# [rows][64] bf16, each box 128B-swizzled, boxes back to back.
Q_BYTES = BM * D * ELEM                 # 32768
KV_BYTES = BN * D * ELEM                # 32768 (one stage of K or of V)
Q_OFF = 0
K_OFF = Q_OFF + Q_BYTES
V_OFF = K_OFF + STAGES * KV_BYTES
BAR_OFF = V_OFF + STAGES * KV_BYTES     # mbarriers, 8 bytes each
BAR_Q = BAR_OFF                         # Q full            (count 1 + tx)
BAR_KFULL = BAR_Q + 8                   # K full [STAGES]   (count 1 + tx)
BAR_VFULL = BAR_KFULL + 8 * STAGES      # V full [STAGES]   (count 1 + tx)
BAR_KEMPTY = BAR_VFULL + 8 * STAGES     # K empty [STAGES] (count = consumer threads)
BAR_VEMPTY = BAR_KEMPTY + 8 * STAGES    # V empty [STAGES] (count = consumer threads)
SMEM_BYTES = BAR_VEMPTY + 8 * STAGES
OVERLAP = True     # FA3 intra-warpgroup overlap: S_j = Q K_j^T in flight with O += P_{j-1} V_{j-1}

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453

F32_NEG_INF = "0xFF800000"
F32_POS_INF = "0x7F800000"


def desc_const(lbo, sbo, swizzle_mode=1):
    """Constant part (everything but the start address) of a wgmma smem descriptor.
    bits 0-13 addr>>4 | 16-29 LBO>>4 | 32-45 SBO>>4 | 49-51 base offset (0) | 62-63 swizzle
    (1 = 128B, 2 = 64B, 3 = 32B)."""
    return ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (swizzle_mode << 62)


# K-major operand (Q as A, K as B), 128B swizzle: LBO unused (1 by convention, i.e. 16 B),
# SBO = 8 rows * 128 B = 1024 B between 8-row core-matrix groups.
DESC_KMAJOR = desc_const(16, 1024)
# MN-major operand (V as B, transposed): LBO = bytes between the 64-wide N chunks
# (one TMA box = BN rows * 128 B), SBO = 1024 B between 8-row groups along K.
DESC_MNMAJOR = desc_const(BN * SW, 1024)


def to_signed64(v):
    return v - (1 << 64) if v >= (1 << 63) else v


class Emitter:
    def __init__(self):
        self.lines = []
        self.consts = {}
        self.const_lines = []
        self.n = 0
        self.ind = 2

    def fresh(self, hint="v"):
        self.n += 1
        return f"%{hint}{self.n}"

    def e(self, s):
        self.lines.append("  " * self.ind + s)

    def c(self, s):  # comment
        self.e("// " + s)

    def const(self, val, ty):
        key = (val, ty)
        if key not in self.consts:
            name = self.fresh("c")
            if ty == "f32":
                lit = val if isinstance(val, str) else repr(float(val))
            else:
                lit = str(val)
            self.const_lines.append(f"{name} = arith.constant {lit} : {ty}")
            self.consts[key] = name
        return self.consts[key]

    def i32(self, v):
        return self.const(v, "i32")

    def i64(self, v):
        return self.const(v, "i64")

    def f32(self, v):
        return self.const(v, "f32")

    def op(self, rhs, hint="v"):
        r = self.fresh(hint)
        self.e(f"{r} = {rhs}")
        return r

    # arithmetic helpers ------------------------------------------------------
    def bin(self, opname, a, b, ty="i32", hint="v"):
        return self.op(f"arith.{opname} {a}, {b} : {ty}", hint)

    def cmpi(self, pred, a, b, ty="i32"):
        return self.op(f"arith.cmpi {pred}, {a}, {b} : {ty}", "p")

    def cmpf(self, pred, a, b):
        return self.op(f"arith.cmpf {pred}, {a}, {b} : f32", "p")

    def select(self, c, a, b, ty):
        return self.op(f"arith.select {c}, {a}, {b} : {ty}")

    def smem_ptr(self, base, off):
        if isinstance(off, int):
            return self.op(f"llvm.getelementptr {base}[{off}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8", "sp")
        return self.op(f"llvm.getelementptr {base}[{off}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8", "sp")

    def gptr(self, base, off64):
        return self.op(f"llvm.getelementptr {base}[{off64}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8", "gp")

    def ex2(self, x):
        # ex2.approx.ftz.f32 (math.exp2 would give the non-ftz ex2.approx.f32)
        return self.op(f'llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"({x}) : (f32) -> f32', "x")

    def shfl_xor(self, x, off):
        return self.op(f"nvvm.shfl.sync bfly {self.i32(-1)}, {x}, {self.i32(off)}, {self.i32(31)} : f32 -> f32", "sh")

    def mbar_wait(self, bar, parity):
        self.e(f"nvvm.mbarrier.try_wait.parity {bar}, {parity}, {self.i32(10000000)} : !llvm.ptr<3>, i32, i32")


# wgmma accumulators are LLVM structs of f32 (one member per register); spelled via aliases
def struct_alias(n):
    return f"!f32x{n}"


def struct_alias_defs():
    return [f"{struct_alias(n)} = !llvm.struct<(" + ", ".join(["f32"] * n) + ")>" for n in sorted({NACC, NACC_O})]


ACC_T = struct_alias(NACC)
ACCO_T = struct_alias(NACC_O)


def rs_wgmma_asm(n):
    """Inline PTX for wgmma m64nNk16 f32 += bf16(regs) * bf16(smem desc), B transposed."""
    nacc = n // 2
    dregs = ", ".join(f"${i}" for i in range(nacc))
    a = 2 * nacc
    asm = ("{\\0A.reg .pred p;\\0Asetp.ne.b32 p, $" + str(a + 5) + ", 0;\\0A"
           f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 "
           "{" + dregs + "}, {$" + f"{a}, ${a+1}, ${a+2}, ${a+3}" + "}, $" + str(a + 4) +
           ", p, 1, 1, 1;\\0A}")
    cons = ",".join(["=f"] * nacc + [str(i) for i in range(nacc)] + ["r"] * 4 + ["l", "n"])
    return asm, cons


def gen_kernel(E, name, causal):
    E.lines = []
    E.consts = {}
    E.const_lines = []
    E.ind = 2
    e = E.e

    E.c("==== roles: warpgroup 0 = TMA producer, warpgroups 1..%d = consumers ====" % NCONS)
    smem = E.op("llvm.mlir.addressof @fa_smem : !llvm.ptr<3>", "smem")
    tid = E.op("nvvm.read.ptx.sreg.tid.x : i32", "tid")
    mblk = E.op("nvvm.read.ptx.sreg.ctaid.x : i32", "mblk")
    head = E.op("nvvm.read.ptx.sreg.ctaid.y : i32", "head")
    bidx = E.op("nvvm.read.ptx.sreg.ctaid.z : i32", "batch")
    wg = E.bin("divui", tid, E.i32(128), hint="wg")

    E.c("GQA: kv head = q head / (Hq / Hkv)")
    grp = E.bin("divui", "%Hq", "%Hkv")
    hkv = E.bin("divui", head, grp, hint="hkv")

    E.c("number of kv blocks this m-block visits")
    nfull = E.bin("addi", "%Skv", E.i32(BN - 1))
    nblk = E.bin("divui", nfull, E.i32(BN), hint="nblk")
    m0 = E.bin("muli", mblk, E.i32(BM), hint="m0")
    diag = E.bin("subi", "%Skv", "%Sq", hint="diag")       # key j visible to query i iff j <= i + diag
    if causal:
        E.c("causal (bottom-right): last visible key of the m-block's last valid row")
        rl = E.bin("addi", m0, E.i32(BM - 1))
        sqm1 = E.bin("subi", "%Sq", E.i32(1))
        rl = E.bin("minsi", rl, sqm1)
        maxkey = E.bin("addi", rl, diag)
        kb = E.bin("divsi", maxkey, E.i32(BN))
        kb1 = E.bin("addi", kb, E.i32(1))
        neg = E.cmpi("slt", maxkey, E.i32(0))
        kb1 = E.select(neg, E.i32(0), kb1, "i32")
        nblk = E.bin("minsi", nblk, kb1, hint="nblk")
        E.c("columns >= blim need masking for the first row of the m-block (uniform bound)")
        b0 = E.bin("addi", m0, diag)
        b0 = E.bin("addi", b0, E.i32(1))
        blim = E.bin("minsi", b0, "%Skv", hint="blim")
    else:
        blim = "%Skv"

    E.c("---- mbarrier init (one thread), then CTA barrier ----")
    bar_q = E.smem_ptr(smem, BAR_Q)
    is_t0 = E.cmpi("eq", tid, E.i32(0))
    e(f"scf.if {is_t0} {{")
    E.ind += 1
    # alignment guard for the 128B swizzle (dynamic smem must start 1024-aligned)
    sa = E.op(f"llvm.ptrtoint {smem} : !llvm.ptr<3> to i32")
    mis = E.bin("andi", sa, E.i32(1023))
    bad = E.cmpi("ne", mis, E.i32(0))
    e(f"scf.if {bad} {{")
    e("  llvm.inline_asm has_side_effects asm_dialect = att \"trap;\", \"\"  : () -> ()")
    e("}")
    e(f"nvvm.mbarrier.init {bar_q}, {E.i32(1)} : !llvm.ptr<3>, i32")
    for s in range(STAGES):
        e(f"nvvm.mbarrier.init {E.smem_ptr(smem, BAR_KFULL + 8*s)}, {E.i32(1)} : !llvm.ptr<3>, i32")
        e(f"nvvm.mbarrier.init {E.smem_ptr(smem, BAR_VFULL + 8*s)}, {E.i32(1)} : !llvm.ptr<3>, i32")
        e(f"nvvm.mbarrier.init {E.smem_ptr(smem, BAR_KEMPTY + 8*s)}, {E.i32(128*NCONS)} : !llvm.ptr<3>, i32")
        e(f"nvvm.mbarrier.init {E.smem_ptr(smem, BAR_VEMPTY + 8*s)}, {E.i32(128*NCONS)} : !llvm.ptr<3>, i32")
    e("nvvm.fence.mbarrier.init")
    e("nvvm.prefetch tensormap, %tmQ : !llvm.ptr")
    e("nvvm.prefetch tensormap, %tmK : !llvm.ptr")
    e("nvvm.prefetch tensormap, %tmV : !llvm.ptr")
    E.ind -= 1
    e("}")
    e("nvvm.barrier0")

    is_prod = E.cmpi("eq", wg, E.i32(0))
    e(f"scf.if {is_prod} {{")
    E.ind += 1
    # ======================= producer =======================
    E.c("================= producer warpgroup =================")
    e(f"nvvm.setmaxregister decrease {PRODUCER_REGS}")
    e(f"scf.if {is_t0} {{")
    E.ind += 1
    E.c("Q tile: NCHUNK boxes [BM rows][64 cols], coords (d, head, row, batch)")
    e(f"nvvm.mbarrier.arrive.expect_tx {bar_q}, {E.i32(Q_BYTES)} : !llvm.ptr<3>, i32")
    for c in range(NCHUNK):
        dst = E.op(f"llvm.addrspacecast {E.smem_ptr(smem, Q_OFF + c*BM*SW)} : !llvm.ptr<3> to !llvm.ptr<7>")
        e(f"nvvm.cp.async.bulk.tensor.shared.cluster.global {dst}, %tmQ, {bar_q}, box[{E.i32(c*CHUNK)}, {head}, {m0}, {bidx}] : !llvm.ptr<7>, !llvm.ptr")
    E.c("K/V ring: stage s = j % STAGES, phase = (j / STAGES) & 1; producer waits empty with phase^1")
    e(f"scf.for %pj = {E.i32(0)} to {nblk} step {E.i32(1)} : i32 {{")
    E.ind += 1
    s = E.bin("remui", "%pj", E.i32(STAGES), hint="st")
    ph = E.bin("divui", "%pj", E.i32(STAGES))
    ph = E.bin("andi", ph, E.i32(1), hint="ph")
    phx = E.bin("xori", ph, E.i32(1))
    s8 = E.bin("muli", s, E.i32(8))
    bar_ke = E.smem_ptr(smem, E.bin("addi", s8, E.i32(BAR_KEMPTY)))
    bar_ve = E.smem_ptr(smem, E.bin("addi", s8, E.i32(BAR_VEMPTY)))
    bar_k = E.smem_ptr(smem, E.bin("addi", s8, E.i32(BAR_KFULL)))
    bar_v = E.smem_ptr(smem, E.bin("addi", s8, E.i32(BAR_VFULL)))
    kvrow = E.bin("muli", "%pj", E.i32(BN))
    soff = E.bin("muli", s, E.i32(KV_BYTES))
    for (bar_empty, bar, toff, tm) in ((bar_ke, bar_k, K_OFF, "%tmK"), (bar_ve, bar_v, V_OFF, "%tmV")):
        E.mbar_wait(bar_empty, phx)
        e(f"nvvm.mbarrier.arrive.expect_tx {bar}, {E.i32(KV_BYTES)} : !llvm.ptr<3>, i32")
        for c in range(NCHUNK):
            o = E.bin("addi", soff, E.i32(toff + c*BN*SW))
            dst = E.op(f"llvm.addrspacecast {E.smem_ptr(smem, o)} : !llvm.ptr<3> to !llvm.ptr<7>")
            e(f"nvvm.cp.async.bulk.tensor.shared.cluster.global {dst}, {tm}, {bar}, box[{E.i32(c*CHUNK)}, {hkv}, {kvrow}, {bidx}] : !llvm.ptr<7>, !llvm.ptr")
    E.ind -= 1
    e("}")
    E.ind -= 1
    e("}")
    E.ind -= 1
    e("} else {")
    E.ind += 1
    # ======================= consumers =======================
    E.c("================= consumer warpgroups =================")
    e(f"nvvm.setmaxregister increase {CONSUMER_REGS}")
    cw = E.bin("subi", wg, E.i32(1), hint="cw")
    ltid = E.bin("remui", tid, E.i32(128), hint="ltid")
    warp = E.bin("divui", ltid, E.i32(32), hint="warp")
    lane = E.bin("remui", ltid, E.i32(32), hint="lane")
    quad = E.bin("divui", lane, E.i32(4))
    tq = E.bin("remui", lane, E.i32(4))
    colbase = E.bin("muli", tq, E.i32(2), hint="colbase")
    E.c("accumulator fragment: thread holds rows r0 = 16*warp + lane/4 and r0 + 8 of its 64-row slab,")
    E.c("columns 8*k + 2*(lane%4) + {0,1}; register index 4*k + 2*i + e (i = row half, e = col parity)")
    r = E.bin("muli", cw, E.i32(WG_ROWS))
    r = E.bin("addi", r, E.bin("muli", warp, E.i32(16)))
    r = E.bin("addi", r, quad)
    qrow0 = E.bin("addi", m0, r, hint="qrow")
    qrow1 = E.bin("addi", qrow0, E.i32(8), hint="qrow")
    qrows = [qrow0, qrow1]
    lims = []
    for i in range(2):
        if causal:
            l = E.bin("addi", qrows[i], diag)
            l = E.bin("addi", l, E.i32(1))
            lims.append(E.bin("minsi", l, "%Skv", hint="lim"))
        else:
            lims.append("%Skv")
    sl2 = E.bin("mulf", "%scale", E.f32(LOG2E), "f32", hint="sl2")

    E.c("wgmma smem descriptors: start address >> 4 in bits 0-13, constants in the rest")
    def desc_base(off_i32, const):
        a = E.op(f"llvm.ptrtoint {E.smem_ptr(smem, off_i32)} : !llvm.ptr<3> to i32")
        a = E.bin("andi", a, E.i32(0x3FFFF))
        a = E.bin("shrui", a, E.i32(4))
        a = E.op(f"arith.extui {a} : i32 to i64")
        return E.bin("ori", a, E.i64(to_signed64(const)), "i64", hint="desc")
    qoff = E.bin("muli", cw, E.i32(WG_ROWS * SW))
    descQ = desc_base(qoff, DESC_KMAJOR)
    descK0 = desc_base(E.i32(K_OFF), DESC_KMAJOR)
    descV0 = desc_base(E.i32(V_OFF), DESC_MNMAJOR)

    # ------------------------------------------------------------------------------
    # FA3 intra-warpgroup overlap (software pipelined by one kv block):
    #   prologue : S_0 = Q K_0^T; softmax(S_0) -> P_0
    #   iter j>=1: issue S_j = Q K_j^T; issue O += P_{j-1} V_{j-1}; wait(1) -> S_j ready;
    #              release K_j; softmax(S_j) -> P_j, alpha_j (overlaps the P V wgmmas);
    #              wait(0); release V_{j-1}; O *= alpha_j
    #   tail     : O += P_{n-1} V_{n-1}; wait(0); release V_{n-1}
    # Operand fences (empty inline asm tying the registers) pin accumulator reads/writes
    # after wgmma.wait_group so LLVM cannot move them into the async window.
    # ------------------------------------------------------------------------------
    def stage(jv):
        s = E.bin("remui", jv, E.i32(STAGES), hint="st")
        ph = E.bin("andi", E.bin("divui", jv, E.i32(STAGES)), E.i32(1), hint="ph")
        s8 = E.bin("muli", s, E.i32(8))
        sd = E.op(f"arith.extui {E.bin('muli', s, E.i32(KV_BYTES >> 4))} : i32 to i64")
        return dict(ph=ph,
                    kfull=E.smem_ptr(smem, E.bin("addi", s8, E.i32(BAR_KFULL))),
                    vfull=E.smem_ptr(smem, E.bin("addi", s8, E.i32(BAR_VFULL))),
                    kempty=E.smem_ptr(smem, E.bin("addi", s8, E.i32(BAR_KEMPTY))),
                    vempty=E.smem_ptr(smem, E.bin("addi", s8, E.i32(BAR_VEMPTY))),
                    descK=E.bin("addi", descK0, sd, "i64", hint="descK"),
                    descV=E.bin("addi", descV0, sd, "i64", hint="descV"))

    def issue_S(descK):
        acc = E.op(f"llvm.mlir.undef : {ACC_T}", "sacc")
        for kk in range(D // KSTEP):
            qa = ((kk * KSTEP) // CHUNK) * (BM * SW) + ((kk * KSTEP) % CHUNK) * ELEM
            kb = ((kk * KSTEP) // CHUNK) * (BN * SW) + ((kk * KSTEP) % CHUNK) * ELEM
            da = E.bin("addi", descQ, E.i64(qa >> 4), "i64") if qa else descQ
            db = E.bin("addi", descK, E.i64(kb >> 4), "i64") if kb else descK
            so = "zero" if kk == 0 else "one"
            acc = E.op(f"nvvm.wgmma.mma_async {da}, {db}, {acc}, #nvvm.shape<m = 64, n = {BN}, k = 16>, "
                       f"D [<f32>, #nvvm.wgmma_scale_out<{so}>], "
                       f"A [<bf16>, #nvvm.wgmma_scale_in<one>, <row>], "
                       f"B [<bf16>, #nvvm.wgmma_scale_in<one>, <col>] : {ACC_T} -> {ACC_T}", "sacc")
        E.e("nvvm.wgmma.commit.group.sync.aligned")
        return acc

    def issue_PV(oacc, A, descV):
        asm, cons = rs_wgmma_asm(D)
        for kk in range(BN // KSTEP):
            vb = kk * KSTEP * SW
            db = E.bin("addi", descV, E.i64(vb >> 4), "i64") if vb else descV
            ins = [E.op(f"llvm.extractvalue {oacc}[{i}] : {ACCO_T}", "oi") for i in range(NACC_O)]
            oacc = E.op(f"llvm.inline_asm has_side_effects asm_dialect = att \"{asm}\", \"{cons}\" "
                        f"{', '.join(ins)}, {', '.join(A[kk])}, {db}, {E.i32(1)} : "
                        f"({', '.join(['f32'] * NACC_O)}, i32, i32, i32, i32, i64, i32) -> {ACCO_T}", "oacc")
        E.e("nvvm.wgmma.commit.group.sync.aligned")
        return oacc

    def fence_struct(st, n, ty):
        """Empty asm that 'redefines' every register of the struct after wgmma.wait."""
        vals = [E.op(f"llvm.extractvalue {st}[{i}] : {ty}", "fv") for i in range(n)]
        cons = ",".join(["=f"] * n + [str(i) for i in range(n)])
        return E.op(f"llvm.inline_asm has_side_effects asm_dialect = att \"\", \"{cons}\" "
                    f"{', '.join(vals)} : ({', '.join(['f32'] * n)}) -> {ty}", "fenced")

    def mask_scores(S, jv):
        ninf = E.f32(F32_NEG_INF)
        jn = E.bin("muli", jv, E.i32(BN))
        need = E.cmpi("sgt", E.bin("addi", jn, E.i32(BN)), blim)
        ms = E.fresh("msk")
        E.e(f"{ms}:{NACC} = scf.if {need} -> ({', '.join(['f32'] * NACC)}) {{")
        E.ind += 1
        cb = E.bin("addi", jn, colbase)
        out = []
        for idx in range(NACC):
            k, i, ee = idx // 4, (idx % 4) // 2, idx % 2
            col = E.bin("addi", cb, E.i32(8 * k + ee)) if (8 * k + ee) else cb
            out.append(E.select(E.cmpi("sge", col, lims[i]), ninf, S[idx], "f32"))
        E.e("scf.yield " + ", ".join(out) + " : " + ", ".join(["f32"] * NACC))
        E.ind -= 1
        E.e("} else {")
        E.e("  scf.yield " + ", ".join(S) + " : " + ", ".join(["f32"] * NACC))
        E.e("}")
        return [f"{ms}#{i}" for i in range(NACC)]

    def softmax(S, mold):
        """returns m_new[2], alpha[2], P[NACC], rowsum[2] (per-thread partial)."""
        zero, ninf = E.f32(0.0), E.f32(F32_NEG_INF)
        mnew, muse, alpha = [], [], []
        for i in range(2):
            vals = [S[idx] for idx in range(NACC) if (idx % 4) // 2 == i]
            while len(vals) > 1:
                vals = [E.bin("maxnumf", vals[t], vals[t + 1], "f32") for t in range(0, len(vals), 2)]
            mx = vals[0]
            mx = E.bin("maxnumf", mx, E.shfl_xor(mx, 1), "f32")
            mx = E.bin("maxnumf", mx, E.shfl_xor(mx, 2), "f32")
            mxs = E.bin("mulf", mx, sl2, "f32")
            mn = E.bin("maxnumf", mold[i], mxs, "f32", hint="mnew") if mold else mxs
            mu = E.select(E.cmpf("oeq", mn, ninf), zero, mn, "f32")
            alpha.append(E.ex2(E.bin("subf", mold[i], mu, "f32")) if mold else None)
            mnew.append(mn); muse.append(mu)
        negm = [E.op(f"arith.negf {muse[i]} : f32") for i in range(2)]
        P = [E.ex2(E.op(f"math.fma {S[idx]}, {sl2}, {negm[(idx % 4) // 2]} : f32")) for idx in range(NACC)]
        rs = []
        for i in range(2):
            vals = [P[idx] for idx in range(NACC) if (idx % 4) // 2 == i]
            while len(vals) > 1:
                vals = [E.bin("addf", vals[t], vals[t + 1], "f32") for t in range(0, len(vals), 2)]
            rs.append(vals[0])
        return mnew, alpha, P, rs

    def pack(P):
        A = []
        for kk in range(BN // KSTEP):
            regs = []
            for (blk, i) in ((2 * kk, 0), (2 * kk, 1), (2 * kk + 1, 0), (2 * kk + 1, 1)):
                v = E.op(f"vector.from_elements {P[4*blk + 2*i]}, {P[4*blk + 2*i + 1]} : vector<2xf32>")
                vb = E.op(f"arith.truncf {v} : vector<2xf32> to vector<2xbf16>")
                regs.append(E.op(f"llvm.bitcast {vb} : vector<2xbf16> to i32", "a"))
            A.append(regs)
        return A

    def mainloop_overlap():
        zero, ninf = E.f32(0.0), E.f32(F32_NEG_INF)
        NA = (BN // KSTEP) * 4
        RT = f"f32, f32, f32, f32, {ACCO_T}"
        res = E.fresh("res")
        nz = E.cmpi("sgt", nblk, E.i32(0))
        E.e(f"{res}:5 = scf.if {nz} -> ({RT}) {{")
        E.ind += 1
        E.c("prologue: block 0")
        st0 = stage(E.i32(0))
        E.mbar_wait(st0["kfull"], st0["ph"])
        E.e("nvvm.wgmma.fence.aligned")
        S = issue_S(st0["descK"])
        E.e("nvvm.wgmma.wait.group.sync.aligned 0")
        S = fence_struct(S, NACC, ACC_T)
        E.e(f"nvvm.mbarrier.arrive {st0['kempty']} : !llvm.ptr<3>")
        S = [E.op(f"llvm.extractvalue {S}[{i}] : {ACC_T}", "s") for i in range(NACC)]
        S = mask_scores(S, E.i32(0))
        m, _, P, rs = softmax(S, None)
        A = pack(P)
        o0 = E.op(f"llvm.mlir.zero : {ACCO_T}", "ozero")
        lp = E.fresh("lp")
        aargs = ", ".join(f"%pa{i} = {A[i // 4][i % 4]}" for i in range(NA))
        E.e(f"{lp}:{5 + NA} = scf.for %j = {E.i32(1)} to {nblk} step {E.i32(1)} "
            f"iter_args(%m0 = {m[0]}, %m1 = {m[1]}, %l0 = {rs[0]}, %l1 = {rs[1]}, %acc = {o0}, {aargs}) "
            f"-> ({RT}, {', '.join(['i32'] * NA)}) : i32 {{")
        E.ind += 1
        cur = stage("%j")
        jm1 = E.bin("subi", "%j", E.i32(1))
        prv = stage(jm1)
        E.mbar_wait(cur["kfull"], cur["ph"])
        E.mbar_wait(prv["vfull"], prv["ph"])   # before the fence: no branches inside the wgmma window
        E.e("nvvm.wgmma.fence.aligned")
        S = issue_S(cur["descK"])
        Ain = [[f"%pa{4*kk + r}" for r in range(4)] for kk in range(BN // KSTEP)]
        O = issue_PV("%acc", Ain, prv["descV"])
        E.e("nvvm.wgmma.wait.group.sync.aligned 1")
        S = fence_struct(S, NACC, ACC_T)
        E.e(f"nvvm.mbarrier.arrive {cur['kempty']} : !llvm.ptr<3>")
        S = [E.op(f"llvm.extractvalue {S}[{i}] : {ACC_T}", "s") for i in range(NACC)]
        S = mask_scores(S, "%j")
        mn, alpha, P, rs = softmax(S, ["%m0", "%m1"])
        A = pack(P)
        E.e("nvvm.wgmma.wait.group.sync.aligned 0")
        O = fence_struct(O, NACC_O, ACCO_T)
        E.e(f"nvvm.mbarrier.arrive {prv['vempty']} : !llvm.ptr<3>")
        E.c("O *= alpha (after the P V wgmmas retired)")
        oacc = E.op(f"llvm.mlir.undef : {ACCO_T}", "oacc")
        for idx in range(NACC_O):
            v = E.op(f"llvm.extractvalue {O}[{idx}] : {ACCO_T}", "o")
            v = E.bin("mulf", v, alpha[(idx % 4) // 2], "f32")
            oacc = E.op(f"llvm.insertvalue {v}, {oacc}[{idx}] : {ACCO_T}", "oacc")
        ln = [E.op(f"math.fma %l{i}, {alpha[i]}, {rs[i]} : f32", "l") for i in range(2)]
        E.e(f"scf.yield {mn[0]}, {mn[1]}, {ln[0]}, {ln[1]}, {oacc}, "
            + ", ".join(A[i // 4][i % 4] for i in range(NA)) + f" : {RT}, {', '.join(['i32'] * NA)}")
        E.ind -= 1
        E.e("}")
        E.c("tail: O += P_{n-1} V_{n-1}")
        last = stage(E.bin("subi", nblk, E.i32(1)))
        E.mbar_wait(last["vfull"], last["ph"])
        E.e("nvvm.wgmma.fence.aligned")
        Ain = [[f"{lp}#{5 + 4*kk + r}" for r in range(4)] for kk in range(BN // KSTEP)]
        O = issue_PV(f"{lp}#4", Ain, last["descV"])
        E.e("nvvm.wgmma.wait.group.sync.aligned 0")
        O = fence_struct(O, NACC_O, ACCO_T)
        E.e(f"nvvm.mbarrier.arrive {last['vempty']} : !llvm.ptr<3>")
        E.e(f"scf.yield {lp}#0, {lp}#1, {lp}#2, {lp}#3, {O} : {RT}")
        E.ind -= 1
        E.e("} else {")
        zo = E.op(f"llvm.mlir.zero : {ACCO_T}", "ozero")
        E.e(f"  scf.yield {ninf}, {ninf}, {zero}, {zero}, {zo} : {RT}")
        E.e("}")
        return res

    E.c("wait for Q")
    E.mbar_wait(bar_q, E.i32(0))
    if not OVERLAP:

        zero = E.f32(0.0)
        ninf = E.f32(F32_NEG_INF)
        oinit = E.op(f"llvm.mlir.zero : {ACCO_T}", "ozero")
        E.c("kv loop: carries running max m (log2 units, 2 rows), per-thread partial row sum l, O fragment")
        res = E.fresh("loop")
        e(f"{res}:5 = scf.for %j = {E.i32(0)} to {nblk} step {E.i32(1)} "
          f"iter_args(%m0 = {ninf}, %m1 = {ninf}, %l0 = {zero}, %l1 = {zero}, %acc = {oinit}) "
          f"-> (f32, f32, f32, f32, {ACCO_T}) : i32 {{")
        E.ind += 1
        s = E.bin("remui", "%j", E.i32(STAGES), hint="st")
        ph = E.bin("divui", "%j", E.i32(STAGES))
        ph = E.bin("andi", ph, E.i32(1), hint="ph")
        s8 = E.bin("muli", s, E.i32(8))
        bar_ke = E.smem_ptr(smem, E.bin("addi", s8, E.i32(BAR_KEMPTY)))
        bar_ve = E.smem_ptr(smem, E.bin("addi", s8, E.i32(BAR_VEMPTY)))
        bar_k = E.smem_ptr(smem, E.bin("addi", s8, E.i32(BAR_KFULL)))
        bar_v = E.smem_ptr(smem, E.bin("addi", s8, E.i32(BAR_VFULL)))
        sdesc = E.op(f"arith.extui {E.bin('muli', s, E.i32(KV_BYTES >> 4))} : i32 to i64")
        descK = E.bin("addi", descK0, sdesc, "i64", hint="descK")
        descV = E.bin("addi", descV0, sdesc, "i64", hint="descV")

        E.c("---- S = Q K^T : %d x wgmma m64n%dk16 SS, both K-major ----" % (D // KSTEP, BN))
        E.mbar_wait(bar_k, ph)
        e("nvvm.wgmma.fence.aligned")
        acc = E.op(f"llvm.mlir.undef : {ACC_T}", "sacc")
        for kk in range(D // KSTEP):
            koff = ((kk * KSTEP) // CHUNK) * 0  # placeholder to keep formula visible
            # byte offset of k-step kk inside a K-major tile: box (kk*16/64) * rows*128 + (kk*16 % 64)*2
            qa = ((kk * KSTEP) // CHUNK) * (BM * SW) + ((kk * KSTEP) % CHUNK) * ELEM
            kb = ((kk * KSTEP) // CHUNK) * (BN * SW) + ((kk * KSTEP) % CHUNK) * ELEM
            da = E.bin("addi", descQ, E.i64(qa >> 4), "i64") if qa else descQ
            db = E.bin("addi", descK, E.i64(kb >> 4), "i64") if kb else descK
            scale_out = "zero" if kk == 0 else "one"
            acc = E.op(f"nvvm.wgmma.mma_async {da}, {db}, {acc}, #nvvm.shape<m = 64, n = {BN}, k = 16>, "
                       f"D [<f32>, #nvvm.wgmma_scale_out<{scale_out}>], "
                       f"A [<bf16>, #nvvm.wgmma_scale_in<one>, <row>], "
                       f"B [<bf16>, #nvvm.wgmma_scale_in<one>, <col>] : {ACC_T} -> {ACC_T}", "sacc")
        e("nvvm.wgmma.commit.group.sync.aligned")
        e("nvvm.wgmma.wait.group.sync.aligned 0")
        S = [E.op(f"llvm.extractvalue {acc}[{i}] : {ACC_T}", "s") for i in range(NACC)]

        E.c("---- mask columns >= limit (tail of Skv%s) on boundary blocks only ----" % (", causal diagonal" if causal else ""))
        jn = E.bin("muli", "%j", E.i32(BN))
        jend = E.bin("addi", jn, E.i32(BN))
        need = E.cmpi("sgt", jend, blim)
        ms = E.fresh("msk")
        e(f"{ms}:{NACC} = scf.if {need} -> ({', '.join(['f32'] * NACC)}) {{")
        E.ind += 1
        cb = E.bin("addi", jn, colbase)
        out = []
        for idx in range(NACC):
            k, i, ee = idx // 4, (idx % 4) // 2, idx % 2
            col = E.bin("addi", cb, E.i32(8 * k + ee)) if (8 * k + ee) else cb
            bad = E.cmpi("sge", col, lims[i])
            out.append(E.select(bad, ninf, S[idx], "f32"))
        e("scf.yield " + ", ".join(out) + " : " + ", ".join(["f32"] * NACC))
        E.ind -= 1
        e("} else {")
        e("  scf.yield " + ", ".join(S) + " : " + ", ".join(["f32"] * NACC))
        e("}")
        S = [f"{ms}#{i}" for i in range(NACC)]

        E.c("---- online softmax (log2 domain); rows i=0,1 of this thread ----")
        mold = ["%m0", "%m1"]
        lold = ["%l0", "%l1"]
        mnew, muse, alpha = [], [], []
        for i in range(2):
            vals = [S[idx] for idx in range(NACC) if (idx % 4) // 2 == i]
            while len(vals) > 1:  # tree reduction
                vals = [E.bin("maxnumf", vals[t], vals[t + 1], "f32") for t in range(0, len(vals), 2)]
            mx = vals[0]
            mx = E.bin("maxnumf", mx, E.shfl_xor(mx, 1), "f32")
            mx = E.bin("maxnumf", mx, E.shfl_xor(mx, 2), "f32")
            mxs = E.bin("mulf", mx, sl2, "f32")
            mn = E.bin("maxnumf", mold[i], mxs, "f32", hint="mnew")
            isninf = E.cmpf("oeq", mn, ninf)
            mu = E.select(isninf, zero, mn, "f32")
            al = E.ex2(E.bin("subf", mold[i], mu, "f32"))
            mnew.append(mn); muse.append(mu); alpha.append(al)
        negm = [E.op(f"arith.negf {muse[i]} : f32") for i in range(2)]
        P = []
        for idx in range(NACC):
            i = (idx % 4) // 2
            t = E.op(f"math.fma {S[idx]}, {sl2}, {negm[i]} : f32")
            P.append(E.ex2(t))
        lnew = []
        for i in range(2):
            vals = [P[idx] for idx in range(NACC) if (idx % 4) // 2 == i]
            while len(vals) > 1:
                vals = [E.bin("addf", vals[t], vals[t + 1], "f32") for t in range(0, len(vals), 2)]
            lnew.append(E.op(f"math.fma {lold[i]}, {alpha[i]}, {vals[0]} : f32", "l"))

        E.c("---- P -> bf16 A fragments: k-step kk uses accumulator n8-blocks 2kk, 2kk+1 ----")
        A = []
        for kk in range(BN // KSTEP):
            regs = []
            for (blk, i) in ((2 * kk, 0), (2 * kk, 1), (2 * kk + 1, 0), (2 * kk + 1, 1)):
                a, b = P[4 * blk + 2 * i], P[4 * blk + 2 * i + 1]
                v = E.op(f"vector.from_elements {a}, {b} : vector<2xf32>")
                vb = E.op(f"arith.truncf {v} : vector<2xf32> to vector<2xbf16>")
                regs.append(E.op(f"llvm.bitcast {vb} : vector<2xbf16> to i32", "a"))
            A.append(regs)

        E.c("---- rescale O by alpha (before the fence), O += P V : RS wgmma, V MN-major (tnspB=1) ----")
        O = []
        for idx in range(NACC_O):
            i = (idx % 4) // 2
            v = E.op(f"llvm.extractvalue %acc[{idx}] : {ACCO_T}", "o")
            O.append(E.bin("mulf", v, alpha[i], "f32"))
        oacc = E.op(f"llvm.mlir.undef : {ACCO_T}", "oacc")
        for idx in range(NACC_O):
            oacc = E.op(f"llvm.insertvalue {O[idx]}, {oacc}[{idx}] : {ACCO_T}", "oacc")
        E.mbar_wait(bar_v, ph)
        e("nvvm.wgmma.fence.aligned")
        asm, cons = rs_wgmma_asm(D)
        for kk in range(BN // KSTEP):
            vb = kk * KSTEP * SW  # 16 kv rows * 128 B per k-step inside each box
            db = E.bin("addi", descV, E.i64(vb >> 4), "i64") if vb else descV
            ins = [E.op(f"llvm.extractvalue {oacc}[{i}] : {ACCO_T}", "oi") for i in range(NACC_O)]
            oacc = E.op(f"llvm.inline_asm has_side_effects asm_dialect = att \"{asm}\", \"{cons}\" "
                        f"{', '.join(ins)}, {', '.join(A[kk])}, {db}, {E.i32(1)} : "
                        f"({', '.join(['f32'] * NACC_O)}, i32, i32, i32, i32, i64, i32) -> {ACCO_T}", "oacc")
        e("nvvm.wgmma.commit.group.sync.aligned")
        e("nvvm.wgmma.wait.group.sync.aligned 0")
        E.c("release the K/V stage")
        e(f"nvvm.mbarrier.arrive {bar_ke} : !llvm.ptr<3>")
        e(f"nvvm.mbarrier.arrive {bar_ve} : !llvm.ptr<3>")
        e(f"scf.yield {mnew[0]}, {mnew[1]}, {lnew[0]}, {lnew[1]}, {oacc} : f32, f32, f32, f32, {ACCO_T}")
        E.ind -= 1
        e("}")
    else:
        res = mainloop_overlap()

    # ---------------- epilogue ----------------
    zero = E.f32(0.0)
    E.c("---- epilogue: quad-reduce l, O / l -> bf16, LSE = (m + log2 l) * ln2 ----")
    mfin = [f"{res}#0", f"{res}#1"]
    lfin = []
    for i, l in enumerate([f"{res}#2", f"{res}#3"]):
        l = E.bin("addf", l, E.shfl_xor(l, 1), "f32")
        l = E.bin("addf", l, E.shfl_xor(l, 2), "f32")
        lfin.append(l)
    accf = f"{res}#4"
    hq64 = E.op(f"arith.extui %Hq : i32 to i64")
    for i in range(2):
        lz = E.cmpf("oeq", lfin[i], zero)
        inv = E.select(lz, zero, E.op(f"arith.divf {E.f32(1.0)}, {lfin[i]} : f32"), "f32")
        valid = E.cmpi("slt", qrows[i], "%Sq")
        e(f"scf.if {valid} {{")
        E.ind += 1
        # element offset ((b*Sq + q)*Hq + h)*D + colbase
        t = E.bin("muli", bidx, "%Sq")
        t = E.bin("addi", t, qrows[i])
        t = E.op(f"arith.extui {t} : i32 to i64")
        t = E.bin("muli", t, hq64, "i64")
        t = E.bin("addi", t, E.op(f"arith.extui {head} : i32 to i64"), "i64")
        t = E.bin("muli", t, E.i64(D), "i64")
        t = E.bin("addi", t, E.op(f"arith.extui {colbase} : i32 to i64"), "i64")
        t = E.bin("muli", t, E.i64(ELEM), "i64")
        prow = E.gptr("%O", t)
        for k in range(NACC_O // 4):
            a = E.bin("mulf", E.op(f"llvm.extractvalue {accf}[{4*k + 2*i}] : {ACCO_T}"), inv, "f32")
            b = E.bin("mulf", E.op(f"llvm.extractvalue {accf}[{4*k + 2*i + 1}] : {ACCO_T}"), inv, "f32")
            v = E.op(f"vector.from_elements {a}, {b} : vector<2xf32>")
            vb = E.op(f"arith.truncf {v} : vector<2xf32> to vector<2xbf16>")
            p = E.op(f"llvm.getelementptr {prow}[{k * 8 * ELEM}] : (!llvm.ptr<1>) -> !llvm.ptr<1>, i8") if k else prow
            e(f"llvm.store {vb}, {p} {{alignment = 4 : i64}} : vector<2xbf16>, !llvm.ptr<1>")
        E.c("LSE from the lane holding columns 0,1 of the row")
        isq0 = E.cmpi("eq", tq, E.i32(0))
        e(f"scf.if {isq0} {{")
        E.ind += 1
        lg = E.op(f'llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"({lfin[i]}) : (f32) -> f32')
        lse = E.bin("mulf", E.bin("addf", mfin[i], lg, "f32"), E.f32(LN2), "f32")
        lse = E.select(lz, E.f32(F32_POS_INF), lse, "f32")
        u = E.bin("muli", bidx, "%Hq")
        u = E.bin("addi", u, head)
        u = E.op(f"arith.extui {u} : i32 to i64")
        u = E.bin("muli", u, E.op(f"arith.extui %Sq : i32 to i64"), "i64")
        u = E.bin("addi", u, E.op(f"arith.extui {qrows[i]} : i32 to i64"), "i64")
        u = E.bin("muli", u, E.i64(4), "i64")
        e(f"llvm.store {lse}, {E.gptr('%LSE', u)} : f32, !llvm.ptr<1>")
        E.ind -= 1
        e("}")
        E.ind -= 1
        e("}")
    E.ind -= 1
    e("}")
    e("gpu.return")

    hdr = [f"  // {name}: FlashAttention forward, bf16 in / f32 acc / bf16 out + f32 LSE, D = {D},",
           f"  //   BM = {BM}, BN = {BN}, {STAGES}-stage K/V ring, {NTHREADS} threads "
           f"(1 producer + {NCONS} consumer warpgroups), causal = {str(causal).lower()}.",
           f"  //   dynamic shared memory: {SMEM_BYTES} bytes; grid (ceil(Sq/{BM}), Hq, B), block ({NTHREADS},1,1).",
           f"  //   %tmQ/%tmK/%tmV: generic pointers to 128-byte CUtensorMaps in device global memory",
           f"  //   (4-D, dims innermost-first (D, H, S, B), box (64, 1, {BM}|{BN}, 1), bf16, SWIZZLE_128B, OOB zero).",
           f"  gpu.func @{name}(%tmQ: !llvm.ptr, %tmK: !llvm.ptr, %tmV: !llvm.ptr, %O: !llvm.ptr<1>, %LSE: !llvm.ptr<1>,",
           f"      %B: i32, %Sq: i32, %Skv: i32, %Hq: i32, %Hkv: i32, %scale: f32) kernel",
           f"      attributes {{nvvm.maxntid = array<i32: {NTHREADS}, 1, 1>, nvvm.minctasm = 1 : i32}} {{"]
    consts = ["    " + c for c in E.const_lines]
    return "\n".join(hdr + consts + E.lines + ["  }"])


def main():
    E = Emitter()
    out = ["// Generated by gen_fa_fwd.py -- FA3-style forward attention for sm_90a, head dim 128.",
           "// Do not edit by hand; edit the generator.",
           f"// smem map: Q @{Q_OFF} ({Q_BYTES} B), K[{STAGES}] @{K_OFF}, V[{STAGES}] @{V_OFF}, "
           f"mbarriers @{BAR_OFF} (q, kfull[{STAGES}], vfull[{STAGES}], kempty[{STAGES}], vempty[{STAGES}]); total {SMEM_BYTES} B",
           *struct_alias_defs(),
           "module attributes {gpu.container_module} {",
           "gpu.module @fa_fwd {",
           "  // dynamic shared memory, 1024-aligned (required by the 128B swizzle atoms)",
           "  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>",
           gen_kernel(E, "fa_fwd_h128", False),
           gen_kernel(E, "fa_fwd_h128_causal", True),
           "}",
           "}"]
    sys.stdout.write("\n".join(out) + "\n")
    # launch facts for the C harness (the C++ pipeline will return these alongside the PTX)
    with open("fa_fwd_h128_launch.h", "w") as f:
        f.write("/* Generated by gen_fa_fwd.py: launch facts of fa_fwd_h128.cubin */\n"
                f"#define FA_SMEM_BYTES {SMEM_BYTES}\n#define FA_THREADS {NTHREADS}\n"
                f"#define FA_BM {BM}\n#define FA_BN {BN}\n#define FA_D {D}\n")


if __name__ == "__main__":
    main()
