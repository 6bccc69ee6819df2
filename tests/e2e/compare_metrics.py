"""Checks on pretrain's --metrics-file records, shared by the multi-rank e2e tests.

  compare_metrics.py losses WORK REFERENCE OTHER...   every train/valid/test loss of each OTHER run
                                                      equals REFERENCE's within 1e-5 relative
                                                      (--tolerance X before `losses` changes it)
  compare_metrics.py resume WORK STRAIGHT HALF REST   HALF (iterations 1-5) then REST (6-10) give
                                                      STRAIGHT's train losses exactly
  compare_metrics.py steps WORK STRAIGHT REST         REST's train losses (a resumed run's
                                                      iterations) equal STRAIGHT's at the same
                                                      iterations within the tolerance

Runs are named by their metrics file, WORK/<name>.jsonl. Exits non-zero with the reason.
"""
import json
import pathlib
import sys

TOLERANCE = 1e-5


def records(work, name):
    return [json.loads(line) for line in open(pathlib.Path(work) / f"{name}.jsonl")]


def losses(work, name, kind):
    return [(r["iteration"], r["lm_loss"]) for r in records(work, name) if r["type"] == kind]


def same_losses(work, reference, others, tolerance=TOLERANCE):
    for kind in ("train", "valid", "test"):
        one = losses(work, reference, kind)
        assert one, (reference, kind)
        for name in others:
            other = losses(work, name, kind)
            assert [i for i, _ in other] == [i for i, _ in one], (name, kind)
            worst = max(abs(a - b) / abs(a) for (_, a), (_, b) in zip(one, other))
            print(f"{name} {kind}: {len(one)} losses, worst relative difference {worst:.2e}")
            assert worst <= tolerance, (name, kind, worst)


def same_after_resume(work, straight, half, rest):
    def train(name):
        return dict(losses(work, name, "train"))
    whole, first, second = train(straight), train(half), train(rest)
    assert sorted(first) == [1, 2, 3, 4, 5] and sorted(second) == [6, 7, 8, 9, 10], (first, second)
    assert {**first, **second} == whole, ({**first, **second}, whole)


def same_steps(work, straight, rest, tolerance):
    whole, resumed = dict(losses(work, straight, "train")), dict(losses(work, rest, "train"))
    assert resumed and set(resumed) <= set(whole), (sorted(resumed), sorted(whole))
    worst = max(abs(whole[i] - loss) / abs(whole[i]) for i, loss in resumed.items())
    print(f"{rest}: iterations {min(resumed)}-{max(resumed)}, worst relative difference {worst:.2e}")
    assert worst <= tolerance, (rest, worst)


if __name__ == "__main__":
    arguments = sys.argv[1:]
    tolerance = TOLERANCE
    if arguments[0] == "--tolerance":
        tolerance = float(arguments[1])
        arguments = arguments[2:]
    command, work, *names = arguments
    if command == "losses":
        same_losses(work, names[0], names[1:], tolerance)
    elif command == "resume":
        same_after_resume(work, *names)
    elif command == "steps":
        same_steps(work, names[0], names[1], tolerance)
    else:
        sys.exit(f"compare_metrics.py: unknown command {command}")
