"""Every head dim the Hopper kernel takes (fa3::hopper::kHeadDims): the
compiler chooses its tiles (attn-hopper-config, written into the facts), and
the CPU tiled pipeline runs the tile-level program at exactly those tiles on
fresh random inputs against the NumPy float64 reference. Tolerances as in
test_cpu_numerics."""
import numpy as np
import pytest

from fa3 import facts as F
from fa3.compile import compile_kernel
from fa3.ir import Fa3Error
from test_cpu_numerics import run_case

# (D of q and k, Dv of v and o): fa3-compile --all's set
HEAD_DIMS = [(64, 64), (96, 96), (128, 128), (192, 192), (192, 128), (256, 256)]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d,dv", HEAD_DIMS, ids=[f"{d}-{dv}" for d, dv in HEAD_DIMS])
def test_head_dim_at_hopper_tiles(d, dv, causal, tmp_path):
    # the variant's kernel, and the table's for long sequences where it has one
    # (head dim 64 causal: 192 rows): each at its own tiles
    kernels = compile_kernel(tmp_path, head_dim=d, head_dim_v=dv, causal=causal,
                             emit_cubin=False)
    assert len(kernels) == (2 if (d, causal) == (64, True) else 1)
    for kf in kernels:
        facts = F.parse_facts(kf.facts.read_text())
        bm, bn = facts.block_m, facts.block_n
        assert (facts.head_dim, facts.head_dim_v) == (d, dv)
        # lengths that leave partial tiles on both axes; GQA 4/2
        sq, skv = bm + 37, 2 * bn + 5
        pipeline = "attn-cpu-tiled-pipeline{block-m=%d block-n=%d}" % (bm, bn)
        run_case(pipeline, np.random.default_rng(), 1, 4, 2, sq, skv, d, dv,
                 {"causal": causal}, "bf16")


def test_unsupported_head_dim_names_the_supported_ones(tmp_path):
    with pytest.raises(Fa3Error) as e:
        compile_kernel(tmp_path, head_dim=80, emit_cubin=False)
    assert "head dim 80 (the Hopper kernel takes 64, 96, 128, 192 or 256)" in str(e.value)
    with pytest.raises(Fa3Error) as e:
        compile_kernel(tmp_path, head_dim=128, head_dim_v=80, emit_cubin=False)
    assert "value head dim 80" in str(e.value)
