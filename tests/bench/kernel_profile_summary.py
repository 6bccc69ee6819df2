#!/usr/bin/env python3
"""Sums one training iteration's kernel times from an Nsight Compute raw CSV.

Input: `ncu --metrics gpu__time_duration.sum --csv --page raw --log-file FILE` of a `pretrain`
run of three or more iterations, one micro-batch each. An iteration starts at the first embedding
forward after the optimizer's AdamW launches; the second-to-last iteration is the last whole one:
the steady state, without the first iteration's one-time work. Prints its kernels grouped by name
(templates and arguments dropped), the largest first, and, given --step-ms (the wall-clock step
time of the same run without ncu), how much of the step no kernel accounts for.

With --by-instance (any program's launches, e.g. gpu_bench's): every launch, grouped by kernel
instance (the name with its template arguments, so that two launch shapes of one kernel stay
apart), in order of first launch, with the mean milliseconds per launch.
"""
import argparse
import csv
import re
import sys

UNIT_TO_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0,
              "ms": 1.0, "second": 1e3, "s": 1e3}


def read_launches(path):
    """(kernel name, milliseconds) per launch, in launch order."""
    with open(path, newline="") as f:
        rows = [row for row in csv.reader(line for line in f if line.startswith('"'))]
    header_at = next((i for i, row in enumerate(rows) if "gpu__time_duration.sum" in row), None)
    if header_at is None:
        sys.exit(f"{path}: no CSV header with gpu__time_duration.sum (did ncu profile a kernel?)")
    header = rows[header_at]
    name_col = next(header.index(c) for c in ("Kernel Name", "Demangled Name", "Function Name")
                    if c in header)
    time_col = header.index("gpu__time_duration.sum")
    to_ms = 1e-6
    launches = []
    for row in rows[header_at + 1:]:
        if len(row) <= max(name_col, time_col):
            continue
        if not row[name_col]:  # the units row
            to_ms = UNIT_TO_MS.get(row[time_col].strip(), to_ms)
            continue
        value = row[time_col].replace(",", "")
        try:
            launches.append((row[name_col], float(value) * to_ms))
        except ValueError:
            continue
    return launches


def short_name(name):
    """family_detail::kernel_name: no templates, parameters or the mds::kernels prefix."""
    name = re.sub(r"^void ", "", name)
    depth, out = 0, []
    for ch in name:  # drop template arguments, parameter lists, "(anonymous namespace)"
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    parts = [p.strip() for p in "".join(out).split("::") if p.strip() not in ("", "mds", "kernels")]
    return "::".join(parts[-2:]) or name[:60]


def is_embedding_forward(name):
    return "embedding_detail" in name and ("forward_kernel" in name or "lookup_kernel" in name)


def last_iteration(launches):
    """The second-to-last iteration's launches (the last whole one before the run's end), or
    None. An iteration starts at its embedding forward, the first after an AdamW launch."""
    starts, stepped = [], True
    for i, (name, _) in enumerate(launches):
        if "adamw" in name:
            stepped = True
        elif is_embedding_forward(name) and stepped:
            starts.append(i)
            stepped = False
    if len(starts) < 3:
        return None
    return launches[starts[-2]:starts[-1]]


def instance_name(name):
    """The kernel with its template arguments: the parameter list and mds::kernels:: dropped."""
    name = re.sub(r"^void ", "", name).replace("mds::kernels::", "")
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            return name[:i]
    return name


def print_by_instance(launches):
    means = {}
    for name, ms in launches:
        calls, total = means.get(instance_name(name), (0, 0.0))
        means[instance_name(name)] = (calls + 1, total + ms)
    print("| kernel instance | launches | mean ms |")
    print("| --- | --- | --- |")
    for name, (calls, total) in means.items():
        print(f"| {name} | {calls} | {total / calls:.4f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--step-ms", type=float, help="the step's wall-clock time without ncu")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--by-instance", action="store_true",
                        help="every launch by kernel instance, mean ms (no iteration needed)")
    args = parser.parse_args()
    launches = read_launches(args.csv)
    if args.by_instance:
        print_by_instance(launches)
        return
    iteration = last_iteration(launches)
    if iteration is None:
        sys.exit(f"{args.csv}: {len(launches)} launches and fewer than three iterations "
                 "(embedding forwards after AdamW launches): cannot find a whole iteration")
    totals = {}
    for name, ms in iteration:
        calls, total = totals.get(short_name(name), (0, 0.0))
        totals[short_name(name)] = (calls + 1, total + ms)
    kernel_ms = sum(ms for _, ms in iteration)
    print(f"last whole iteration: {len(iteration)} kernel launches, {kernel_ms:.2f} ms of kernels"
          f" ({len(launches)} launches profiled in all)")
    if args.step_ms:
        gap = args.step_ms - kernel_ms
        print(f"step without ncu: {args.step_ms:.2f} ms; not in any kernel: {gap:.2f} ms"
              f" ({100 * gap / args.step_ms:.0f}%: host work, copies, synchronization, gaps)")
    print()
    print("| kernel | launches | ms | share of kernel time |")
    print("| --- | --- | --- | --- |")
    ranked = sorted(totals.items(), key=lambda item: -item[1][1])
    for name, (calls, ms) in ranked[:args.top]:
        print(f"| {name} | {calls} | {ms:.3f} | {100 * ms / kernel_ms:.1f}% |")
    rest = ranked[args.top:]
    if rest:
        print(f"| ({len(rest)} more) | {sum(c for _, (c, _) in rest)} |"
              f" {sum(m for _, (_, m) in rest):.3f} | |")


if __name__ == "__main__":
    main()
