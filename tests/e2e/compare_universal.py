"""Compares two universal checkpoints' zero/ folders (used by resume_universal_test.sh):

  compare_universal.py FIRST AGAIN [--grown-rows N]

Every parameter folder of FIRST is in AGAIN, and each state (fp32, exp_avg, exp_avg_sq) is
identical, as is Adam's step (optimizer_state.pt's param_groups and any step.pt). With
--grown-rows N, AGAIN's word embedding may have more rows than FIRST's N: its first N rows must be
FIRST's and the rest zero. Exits non-zero with the reason.
"""
import argparse
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ckpt_torch_load_test import install_stubs  # noqa: E402


def steps(folder):
    groups = torch.load(folder / "optimizer_state.pt", weights_only=False)["param_groups"]
    found = [g["step"] for g in groups]
    found += [torch.load(p, weights_only=False) for p in sorted(folder.rglob("step.pt"))]
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("first", type=pathlib.Path)
    parser.add_argument("again", type=pathlib.Path)
    parser.add_argument("--grown-rows", type=int)
    args = parser.parse_args()
    install_stubs()
    names = sorted(p.name for p in args.first.iterdir() if p.is_dir())
    assert names == sorted(p.name for p in args.again.iterdir() if p.is_dir()), "folders differ"
    for name in names:
        for state in ("fp32", "exp_avg", "exp_avg_sq"):
            a = torch.load(args.first / name / f"{state}.pt", weights_only=False)["param"]
            b = torch.load(args.again / name / f"{state}.pt", weights_only=False)["param"]
            rows = args.grown_rows
            if rows is not None and name.endswith("word_embeddings.weight"):
                assert a.shape[0] == rows and b.shape[0] > rows, (a.shape, b.shape)
                assert torch.equal(b[:rows], a) and not b[rows:].any(), (name, state)
            else:
                assert torch.equal(a, b), (name, state)
    first_steps, again_steps = steps(args.first), steps(args.again)
    assert first_steps and repr(first_steps) == repr(again_steps), (first_steps, again_steps)
    grown = f"; word embedding's {args.grown_rows} rows kept, new rows zero" if args.grown_rows else ""
    print(f"{len(names)} parameters: fp32, exp_avg, exp_avg_sq and step identical{grown}")


if __name__ == "__main__":
    main()
