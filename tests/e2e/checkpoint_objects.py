"""Deep equality of what torch.load returns from two checkpoint files, for the e2e tests.

  same(x, y, where, skip=())   asserts that x and y are equal all the way down: tensors with the
                               same dtype and values, numpy arrays, dicts with the same keys in the
                               same order (keys in `skip` not compared, at any depth), lists,
                               tuples, and objects (the loss scaler) by their attributes; the
                               assertion names the path where they differ.
  load(path)                   torch.load on the CPU with upstream's pickled classes stubbed.
"""
import numpy
import torch

from ckpt_torch_load_test import install_stubs  # upstream classes the files name

install_stubs()


def load(path):
    return torch.load(path, map_location="cpu", weights_only=False)


def same(x, y, where, skip=()):
    if isinstance(x, torch.Tensor):
        assert isinstance(y, torch.Tensor) and x.dtype == y.dtype and torch.equal(x, y), where
    elif isinstance(x, dict):
        assert list(x) == list(y), where
        for key in x:
            if key not in skip:
                same(x[key], y[key], f"{where}.{key}", skip)
    elif isinstance(x, (list, tuple)):
        assert len(x) == len(y), where
        for i, (u, v) in enumerate(zip(x, y)):
            same(u, v, f"{where}[{i}]", skip)
    elif isinstance(x, numpy.ndarray):
        assert numpy.array_equal(x, y), where
    elif hasattr(x, "__dict__"):
        assert type(x) is type(y), where
        same(vars(x), vars(y), where, skip)
    else:
        assert x == y, f"{where}: {x!r} != {y!r}"
