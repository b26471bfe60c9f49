"""A torch tensor over raw device memory: a pointer the runtime was given
and element strides. The GPU checks' --emulate modes read a launch's
arguments through it (check_bwd.py, check_fp8.py). Needs torch."""
import torch


class _DeviceArray:
    """A view of device memory for torch.as_tensor (__cuda_array_interface__)."""

    def __init__(self, ptr, shape, strides, typestr, itemsize):
        self.__cuda_array_interface__ = {
            "data": (int(ptr), False), "shape": tuple(int(n) for n in shape),
            "strides": tuple(int(s) * itemsize for s in strides), "typestr": typestr,
            "version": 2}


# what the array interface is told: f32 as itself, 16- and 8-bit floats
# as integers of their width, viewed back as the float type
_RAW = {torch.float32: ("<f4", 4), torch.bfloat16: ("<i2", 2), torch.float16: ("<i2", 2),
        torch.float8_e4m3fn: ("|u1", 1)}


def device_view(ptr, shape, strides, dtype):
    """A tensor of `dtype` over device memory at ptr (element strides)."""
    typestr, itemsize = _RAW[dtype]
    t = torch.as_tensor(_DeviceArray(ptr, shape, strides, typestr, itemsize), device="cuda")
    return t if dtype == torch.float32 else t.view(dtype)
