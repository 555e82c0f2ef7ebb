#!/usr/bin/env python3
"""Checks the shell examples of psbench's documentation against the binaries.

Every command in a ```sh block of README.md, docs/*.md and the READMEs under deploy/ and
bench/floors/ that calls a psbench binary is checked flag by flag against that binary's (or
subcommand's) --help: a flag the docs show must exist. The examples that run on one machine
(psbench run, train and report; not over RDMA, which needs a device) are then run, shortened
so that the suite stays quick: 20 operations per payload, the tiny model, a batch of 2, 3
steps. A refused flag (exit 2) or a failure fails the test, naming the file and line.

usage: docs_examples.py REPO BIN_DIR
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

BINARIES = ("psbench", "psbench-ps", "psbench-worker", "psbench-floor-tcp", "psbench-floor-grpc",
            "psbench-floor-mpi")
SUBCOMMANDS = ("run", "train", "report", "ssh", "slurm", "mpirun")
RUN_TIMEOUT_S = 180


def doc_files(repo):
    files = ["README.md"]
    files += sorted("docs/" + f for f in os.listdir(os.path.join(repo, "docs")) if f.endswith(".md"))
    for d in ("deploy/slurm", "deploy/mpi", "bench/floors"):
        if os.path.exists(os.path.join(repo, d, "README.md")):
            files.append(d + "/README.md")
    return files


def shell_lines(path):
    """(line number, logical line) of every ```sh block, continuations joined, comments cut."""
    out, in_block, pending, start = [], False, "", 0
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if line.startswith("```"):
                in_block = not in_block and line[3:].strip() in ("sh", "bash", "shell")
                pending = ""
                continue
            if not in_block:
                continue
            if not pending:
                start = n
            stripped = line.strip()
            if stripped.endswith("\\"):
                pending += stripped[:-1] + " "
                continue
            text = pending + stripped
            pending = ""
            if text and not text.startswith("#"):
                out.append((start, text))
    return out


def commands(text):
    """Each psbench binary called on a line: (binary, subcommand or None, argument tokens)."""
    try:
        tokens = shlex.split(text, comments=True)
    except ValueError:
        return []
    found, current = [], None
    for tok in tokens:
        if tok in ("&&", "||", ";", "|", ":", "do", "done", "then") or tok.endswith(";"):
            current = None
            continue
        base = os.path.basename(tok)
        if base in BINARIES or base == "psbench.sbatch":
            # The batch script runs `psbench slurm` with its arguments.
            current = ["psbench", "slurm", []] if base == "psbench.sbatch" else [base, None, []]
            found.append(current)
            continue
        if current is None:
            continue
        if current[0] == "psbench" and current[1] is None and not current[2] and tok in SUBCOMMANDS:
            current[1] = tok
            continue
        current[2].append(tok)
    return [tuple(c) for c in found]


HELP_CACHE = {}


def known_flags(bin_dir, binary, sub):
    key = (binary, sub)
    if key not in HELP_CACHE:
        if not os.access(os.path.join(bin_dir, binary), os.X_OK):
            return None  # not built here
        argv = [os.path.join(bin_dir, binary)] + ([sub] if sub else []) + ["--help"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        text = r.stdout + r.stderr
        # psbench's own help ("  --flag=default", "  --flag") and Abseil's ("--flag (text); ...").
        names = re.findall(r"^\s+--([a-z0-9_-]+)(?:[=\s(]|$)", text, re.M)
        HELP_CACHE[key] = {n.replace("_", "-") for n in names} | {"help"}
    return HELP_CACHE[key]


def flag_name(tok):
    name = tok[2:].split("=", 1)[0]
    return name


def check_flags(bin_dir, binary, sub, args):
    """The flags of `args` the binary does not know."""
    known = known_flags(bin_dir, binary, sub)
    if known is None:
        return [f"(any flag: {binary} is not built in {bin_dir})"]
    unknown = []
    for tok in args:
        if not tok.startswith("--") or "$" in tok:
            continue
        name = flag_name(tok).replace("_", "-")
        if name in known or (name.startswith("no") and name[2:] in known):  # --nofoo: a boolean
            continue
        unknown.append(tok)
    return unknown


def runnable(binary, sub, args, workdir):
    if binary != "psbench" or sub not in ("run", "train", "report"):
        return False
    joined = " ".join(args)
    if "grpc+verbs" in joined or "$" in joined or "..." in joined or "--ps-interface" in joined:
        return False
    if sub == "report":
        inputs = [a for a in args if not a.startswith("--")]
        if not inputs or any(not os.path.exists(os.path.join(workdir, a)) for a in inputs):
            return False
        return "--compare" not in joined  # its series come from other examples' labels
    return True


SHORTER = {
    "--iterations": "20", "--warmup-iterations": "2", "--steps": "3", "--batch": "2",
    "--trainer": "tiny", "--model": "tiny", "--threads": "2",
}


def shortened(sub, args):
    """`args` made quick: payload benchmarks by count (20 operations per size), the tiny
    model, a batch of 2, 3 steps."""
    payload = sub == "run" and not any(a.startswith("--trainer") for a in args) and \
        "--benchmark=updates" not in args
    out = []
    for tok in args:
        name = tok.split("=", 1)[0]
        if payload and name in ("--duration", "--warmup"):
            continue
        out.append(name + "=" + SHORTER[name] if name in SHORTER and "=" in tok else tok)
    for name in ("--warmup-iterations", "--iterations"):
        if payload and not any(a.startswith(name + "=") for a in out):
            out.append(name + "=" + SHORTER[name])
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    repo, bin_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    failures, checked, ran, done = [], 0, 0, set()
    with tempfile.TemporaryDirectory(prefix="psbench-docs.") as workdir:
        # Examples name inputs relative to the repository (payloads/traces/...).
        os.symlink(os.path.join(repo, "payloads"), os.path.join(workdir, "payloads"))
        for doc in doc_files(repo):
            for line_no, text in shell_lines(os.path.join(repo, doc)):
                for binary, sub, args in commands(text):
                    where = f"{doc}:{line_no}"
                    checked += 1
                    if binary == "psbench" and sub is None and args:
                        failures.append(f"{where}: psbench without a subcommand: {text}")
                        continue
                    unknown = check_flags(bin_dir, binary, sub, args)
                    if unknown:
                        failures.append(f"{where}: {binary} {sub or ''} does not take {' '.join(unknown)}: {text}")
                        continue
                    if not runnable(binary, sub, args, workdir):
                        continue
                    argv = [os.path.join(bin_dir, binary), sub] + shortened(sub, args)
                    if tuple(argv) in done:
                        continue
                    done.add(tuple(argv))
                    ran += 1
                    t0 = time.monotonic()
                    try:
                        r = subprocess.run(argv, cwd=workdir, capture_output=True, text=True,
                                           timeout=RUN_TIMEOUT_S)
                    except subprocess.TimeoutExpired:
                        failures.append(f"{where}: did not finish in {RUN_TIMEOUT_S} s: {shlex.join(argv)}")
                        continue
                    status = "ok" if r.returncode == 0 else f"exit {r.returncode}"
                    print(f"{where}: {status} in {time.monotonic() - t0:.1f} s: {shlex.join(argv[1:])}",
                          flush=True)
                    if r.returncode != 0:
                        last = (r.stderr.strip().splitlines() or ["(no stderr)"])[-1]
                        failures.append(f"{where}: exit {r.returncode}: {shlex.join(argv)}: {last}")
    print(f"docs_examples: {checked} commands checked, {ran} run, {len(failures)} failed")
    for f in failures:
        print("FAIL " + f)
    if checked == 0:
        print("FAIL no example found: the docs or this script changed")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
