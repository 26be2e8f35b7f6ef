"""`make mutation`: how many seeded mutants of the compiler do the tests kill?

Mutation testing with cosmic-ray (PyPI `cosmic-ray`, the `mutation` extra). Why
cosmic-ray rather than mutmut: fragflow's folders become subpackages through
pyproject's package-dir mapping (passes/ is fragflow.passes); mutmut 3 imports each
mutant through a trampoline named after the file's path and copies the sources to a
`mutants/` folder of its own, which that mapping breaks. cosmic-ray writes one mutant
at a time into a file, runs a test command and puts the file back, and its mutation
API (`mutate_and_test`, a session database that `cr-report` reads) lets this script
choose the sample and the tests for each mutant (mutmut has no seeded sample either).
The extra pins cosmic-ray 8.7.0: this script lists mutants with its init command's
`_all_work_items` and writes diffs with `mutating._make_diff`.

What it does (nothing in the checkout is mutated):

1. copies the committed tree (`git archive HEAD`, or the work tree with --worktree)
   to build/mutation/tree/src and assembles `fragflow` in build/mutation/tree/lib out
   of symlinks to the copy's folders, so the copy's tests import the copy
   (PYTHONPATH=lib; the copy's own fragflow/ folder is moved out of src so that the
   current directory cannot shadow it);
2. lists every mutant cosmic-ray's core operators make in TARGETS: passes/,
   passes/autodiff/, ir/ops/ (type rules, numpy references) and the kernel-selection
   functions of codegen (CODEGEN_DECISIONS), and draws --sample of them with --seed
   (FRAGFLOW_MUTATION_SEED);
3. profiles the test files of POOL once (cached in build/mutation/profile while the
   file, the test helpers and the mutated modules stay the same): a coverage run per
   file gives each test's lines, time and outcome;
4. runs each mutant against the tests that pass unmutated and run its lines, fastest
   first up to --budget seconds, then the tests written for mutants
   (tests/**/test_*_mutants.py), with `pytest -x`; a mutant inside an annotation that
   is never evaluated (`from __future__ import annotations`) is counted equivalent
   without a run;
5. prints killed / killed only by the mutant tests / survived / timeout / equivalent
   per module and in total, the killed fraction with and without the mutant tests,
   and writes build/mutation/survivors.txt (file:line, operator, diff), survivors.json
   (for --survivors: run only those again) and the cosmic-ray session
   build/mutation/session.sqlite (`cr-report` reads it).

    .venv/bin/python tests/mutation/run.py --sample 20        # a quick measure
    make mutation MUTATION_ARGS="--sample 400 --seed 7"
"""
from __future__ import annotations

import argparse
import ast
import fnmatch
import hashlib
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Files whose mutants are drawn; codegen files only inside the named functions.
TARGETS = ["passes/*.py", "passes/autodiff/*.py", "ir/ops/*.py", "ir/ops/*/*.py"]
CODEGEN_DECISIONS = {
    # the strategies' applies functions and what they decide with (codegen/strategy.py)
    "codegen/matmul.py": {"_pow2", "max_targets", "choose_blocking", "panel_layout",
                          "use_blocked", "lanes_path", "_splits", "_offsets", "packed_plan",
                          "_packed", "_blocked", "_lanes", "_plain"},
    "codegen/conv.py": {"plan_blocks", "stitch_free", "reads_depthwise_blocks",
                        "_blocked_anyway", "depthwise_stitch_free", "_direct_fits",
                        "_blocked_first", "_pool_applies", "_depthwise_direct_applies",
                        "_direct_applies", "_packed_applies", "_blocked_applies",
                        "_depthwise_blocked_applies", "_filter_blocked_applies"},
    "codegen/depthwise.py": {"direct_applies", "reads_blocks"},
    "codegen/pool.py": {"path"},
    "codegen/reduce.py": {"_fill", "_texel_passes", "_element_passes", "_split_few",
                          "_softmax_direct", "_softmax_partials", "_softmax_tree"},
    "codegen/reduce_tree.py": {"choose_window", "groups_of", "plan", "texel_pass",
                               "column_targets", "lane_blocks", "row_run"},
    "codegen/schedule.py": {"graph_facts", "schedule"},
    "codegen/strategy.py": {"_ordered", "applicable", "choose"},
}
TARGETS += sorted(CODEGEN_DECISIONS)

# The tests a mutant may be run against: every test of these files that passes
# unmutated and runs one of the mutant's lines (coverage, one profile run per file),
# fastest first up to --budget seconds.
POOL = ["tests/ops/test_*.py", "tests/passes/test_*.py", "tests/autodiff/test_*.py",
        "tests/codegen/test_*.py", "tests/ir/test_*.py", "tests/models/test_*.py",
        "tests/test_registry.py"]
# minutes each (training loops, fuzzed files, TensorFlow's op list); what they run,
# faster tests run too
SLOW = {"tests/autodiff/test_deep_chains.py", "tests/autodiff/test_manual_training.py",
        "tests/models/test_cnn_training.py", "tests/models/test_sequential.py",
        "tests/ops/test_tf_ops.py", "tests/ir/test_load_graph_schema.py",
        "tests/ir/test_check_shader_fast.py"}
# Tests written to kill the mutants earlier runs left alive: run after the others and
# outside the budget, so that the report can say what the suite killed without them.
MUTANT_TESTS = "test_*_mutants.py"


def pool(src: Path) -> list[str]:
    return sorted({str(p.relative_to(src)) for pattern in POOL for p in src.glob(pattern)}
                  - SLOW)


def is_mutant_test(node: str) -> bool:
    return fnmatch.fnmatch(Path(node.split("::")[0]).name, MUTANT_TESTS)


def make_copy(work: Path, worktree: bool, commit: str = "HEAD") -> tuple[Path, Path]:
    """The tree to mutate, and a site folder whose fragflow is made of the tree's folders."""
    shutil.rmtree(work, ignore_errors=True)
    src, lib = work / "src", work / "lib"
    src.mkdir(parents=True)
    if worktree:   # tracked and untracked (not ignored) files as they are now
        names = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                               check=True, capture_output=True).stdout.decode().split("\0")
        for name in filter(None, names):
            if (ROOT / name).is_file():
                (src / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, src / name)
    else:
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    try:
        import tomllib
    except ImportError:   # Python 3.10
        import tomli as tomllib
    mapping = tomllib.loads((src / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"]
    package = lib / mapping.pop("fragflow")
    shutil.move(str(src / "fragflow"), str(package))   # out of src: it would shadow lib's
    for name, folder in mapping.items():
        (package / name.split(".", 1)[1]).symlink_to(src.resolve() / folder)
    return src, lib


def enclosing_functions(path: Path) -> dict[int, str]:
    """Line -> name of the innermost function defined around it."""
    lines = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for line in range(node.lineno, node.end_lineno + 1):
                if line not in lines or lines[line][0] < node.lineno:
                    lines[line] = (node.lineno, node.name)
    return {line: name for line, (_, name) in lines.items()}


def unevaluated_annotations(path: Path) -> list[tuple]:
    """The (start, end) positions of the annotations of a module that imports
    `annotations` from __future__: never evaluated, so a mutant there is equivalent."""
    tree = ast.parse(path.read_text())
    if not any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and
               any(a.name == "annotations" for a in n.names) for n in tree.body):
        return []
    found = []
    for node in ast.walk(tree):
        parts = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            parts.append(node.returns)
            args = node.args
            parts += [a.annotation for a in args.posonlyargs + args.args + args.kwonlyargs]
            parts += [a.annotation for a in (args.vararg, args.kwarg) if a is not None]
        elif isinstance(node, ast.AnnAssign):
            parts.append(node.annotation)
        found += [((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset))
                  for a in parts if a is not None]
    return found


def in_annotation(spec, annotations) -> bool:
    return any(start <= tuple(spec.start_pos) and tuple(spec.end_pos) <= end
               for start, end in annotations)


def all_mutants(src: Path) -> list:
    from cosmic_ray.commands.init import _all_work_items

    modules = sorted({p.relative_to(src) for pattern in TARGETS for p in src.glob(pattern)})
    items = []
    for module in modules:
        keep = CODEGEN_DECISIONS.get(str(module))
        functions = enclosing_functions(src / module) if keep else None
        for item in _all_work_items([module], {}):
            line = item.mutations[0].start_pos[0]
            if keep is None or functions.get(line) in keep:
                items.append(item)
    return items


def digest(paths) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(str(path).encode() + b"\0" + Path(path).read_bytes())
    return h.hexdigest()[:16]


def profile(test_file: str, src: Path, lib: Path, cache: Path, key: str) -> dict:
    """One test file's tests: {"tests": {node id: {seconds, passed}}, "lines": {module:
    {line: [node ids]}}}, from a coverage run of the file (cached under its key)."""
    path = cache / f"{Path(test_file).stem}-{digest([src / test_file])}-{key}.json"
    if path.exists():
        return json.loads(path.read_text())
    data_file, times = cache / "coverage.db", cache / "times.json"
    data_file.unlink(missing_ok=True)
    env = dict(os.environ, FRAGFLOW_MUTATION_PROFILE=str(times),
               PYTHONPATH=f"{lib}{os.pathsep}{Path(__file__).resolve().parent}")
    # coverage names a file by its real path: the copy's, behind lib's symlinks
    include = ",".join(f"{src}/{pattern}" for pattern in TARGETS)
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "coverage", "run", f"--data-file={data_file}",
                    f"--include={include}", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "-p", "profile_plugin", test_file], env=env, cwd=src,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import coverage

    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    lines = {}
    for measured in data.measured_files():
        module = str(Path(measured).resolve().relative_to(src))
        by_line = data.contexts_by_lineno(measured)
        lines[module] = {str(n): sorted(set(c)) for n, c in by_line.items()}
    tests = json.loads(times.read_text()) if times.exists() else {}
    result = {"tests": tests, "lines": lines}
    path.write_text(json.dumps(result))
    passed = sum(t["passed"] for t in tests.values())
    print(f"  profiled {test_file}: {passed}/{len(tests)} passed, "
          f"{time.monotonic() - start:.0f} s", flush=True)
    return result


def chosen_tests(spec, profiles: dict, budget: float) -> tuple[list, list]:
    """(tests of the suite, tests written for mutants) to run against a mutant: those
    that pass unmutated and run its lines; for a line run only at import (a record's
    registration), those that run any line of its module. The suite's fastest first, up
    to budget seconds as profiled (at least one); the mutant tests all."""
    module = str(spec.module_path)
    lines = {str(n) for n in range(spec.start_pos[0], spec.end_pos[0] + 1)}
    passed = {n: t["seconds"] for p in profiles.values() for n, t in p["tests"].items()
              if t["passed"]}
    covering, anywhere = set(), set()
    for p in profiles.values():
        for line, contexts in p["lines"].get(module, {}).items():
            found = {c for c in contexts if c in passed}
            anywhere |= found
            if line in lines:
                covering |= found
    if not covering and any("" in p["lines"].get(module, {}).get(line, ())
                            for p in profiles.values() for line in lines):
        covering = anywhere
    chosen, total = [], 0.0
    for node in sorted((n for n in covering if not is_mutant_test(n)),
                       key=lambda n: (passed[n], n)):
        if chosen and total + passed[node] > budget:
            break
        chosen.append(node)
        total += passed[node]
    return chosen, sorted(n for n in covering if is_mutant_test(n))


def failed(output: str) -> list[str]:
    """The node ids of pytest's short summary (-ra): FAILED and ERROR lines."""
    return [line.split()[1] for line in output.splitlines()
            if line.startswith(("FAILED ", "ERROR ")) and len(line.split()) > 1]


def mutant_key(spec) -> tuple:
    return (str(spec.module_path), spec.operator_name, spec.occurrence)


def pytest_command(tests: list[str]) -> str:
    return (f"{shlex.quote(sys.executable)} -m pytest -x -q -p no:cacheprovider "
            f"-W ignore::pytest.PytestUnraisableExceptionWarning "
            f"{' '.join(shlex.quote(t) for t in tests)}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=300, help="mutants to run (0: all)")
    parser.add_argument("--seed", type=int,
                        default=int(os.environ.get("FRAGFLOW_MUTATION_SEED", "23")))
    parser.add_argument("--budget", type=float, default=12.0,
                        help="seconds of (profiled) tests per mutant at most")
    parser.add_argument("--only", default="", help="glob of the modules to draw from")
    parser.add_argument("--worktree", action="store_true",
                        help="copy the work tree (tracked and untracked files), not HEAD")
    parser.add_argument("--out", default=str(ROOT / "build" / "mutation"))
    parser.add_argument("--list", action="store_true", help="count the mutants and stop")
    parser.add_argument("--survivors", action="store_true",
                        help="run only the last run's survivors (survivors.json) again, on "
                        "that run's commit, with the work tree's mutant tests")
    args = parser.parse_args(argv)

    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.work_db import WorkDB, use_db

    out = Path(args.out).resolve()
    last = out / "survivors.json"
    previous = json.loads(last.read_text()) if args.survivors else {}
    # --survivors: the sources of that run, the mutant tests of the work tree
    src, lib = make_copy(out / "tree", args.worktree, previous.get("commit", "HEAD"))
    if args.survivors:
        for path in ROOT.glob(f"tests/**/{MUTANT_TESTS}"):
            shutil.copy2(path, src / path.relative_to(ROOT))
    src, lib = src.resolve(), lib.resolve()
    commit = previous.get("commit") or subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
        check=True).stdout.strip()
    os.chdir(src)   # cosmic-ray resolves module paths and runs the tests from here
    os.environ["PYTHONPATH"] = str(lib)
    found = subprocess.run([sys.executable, "-c", "import fragflow.passes as p; print(p.__file__)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    if not Path(found).resolve().is_relative_to(src):
        raise SystemExit(f"the copy's tests would import {found}, not the copy")

    everything = all_mutants(Path("."))
    sources = digest(sorted({str(i.mutations[0].module_path) for i in everything}))
    items = [i for i in everything
             if fnmatch.fnmatch(str(i.mutations[0].module_path), args.only or "*")]
    per_module = Counter(str(i.mutations[0].module_path) for i in items)
    print(f"{len(items)} mutants in {len(per_module)} modules (cosmic-ray core operators)")
    if args.list:
        for module, n in sorted(per_module.items()):
            print(f"  {n:5d}  {module}")
        return 0
    sample = items if args.sample <= 0 or args.sample >= len(items) else \
        random.Random(args.seed).sample(items, args.sample)
    if args.survivors:
        if previous["sources"] != sources:
            raise SystemExit("the mutated modules changed since the last run: run them all")
        wanted = {tuple(s) for s in previous["mutants"]}
        sample = [i for i in items if mutant_key(i.mutations[0]) in wanted]
        print(f"again: {len(sample)} survivors of {last}")
    sample.sort(key=lambda i: (str(i.mutations[0].module_path), i.mutations[0].start_pos))
    print(f"sample: {len(sample)} (seed {args.seed}); pytest -x, one worker, "
          f"up to {args.budget:g} s of tests a mutant", flush=True)

    # Which tests run which lines, and how long each takes: one coverage run per test
    # file of the pool, cached while the file, the test helpers and the mutated
    # modules stay as they are.
    support = [src / "tests" / n for n in ("conftest.py", "reference.py", "gradcheck.py")]
    key = digest([p for p in support if p.exists()] + sorted(per_module))
    cache = out / "profile"
    cache.mkdir(parents=True, exist_ok=True)
    files = pool(src)
    print(f"profile of {len(files)} test files (cached in {cache})", flush=True)
    profiles = {f: profile(f, src, lib, cache, key) for f in files}

    db_path = out / "session.sqlite"
    db_path.unlink(missing_ok=True)
    counts = defaultdict(Counter)
    survivors, new_kills, equivalents, annotations = [], [], [], {}
    start_all = time.monotonic()
    with use_db(str(db_path), WorkDB.Mode.create) as db:
        db.add_work_items(sample)
        for n, item in enumerate(sample, 1):
            spec = item.mutations[0]
            module = str(spec.module_path)
            suite, extra = chosen_tests(spec, profiles, args.budget)
            tests = suite + extra
            start = time.monotonic()
            if in_annotation(spec, annotations.setdefault(module, unevaluated_annotations(
                    src / module))):
                kind = "equivalent"   # an annotation that is never evaluated
                with use_mutation_diff(spec) as diff:
                    pass
            elif tests:
                seconds = sum(profiles[t.split("::")[0]]["tests"][t]["seconds"] for t in tests)
                # run the suite's tests first; -x stops at the first that fails
                result = mutate_and_test(item.mutations, pytest_command(tests),
                                         timeout=max(60.0, 20 + 5 * seconds))
                db.set_result(item.job_id, result)
                if result.worker_outcome.value == "no-test":
                    kind = "no mutant"
                elif result.output == "timeout":
                    kind = "timeout"
                else:
                    kind = "killed" if result.is_killed else "survived"
                    if kind == "killed" and any(is_mutant_test(n) for n in failed(result.output)):
                        kind = "killed new"   # by a mutant test: the suite let it live
                diff = result.diff
            else:
                kind = "survived"   # no test of its pool runs the line
                with use_mutation_diff(spec) as diff:
                    pass
            took = time.monotonic() - start
            counts[module][kind] += 1
            where = f"{module}:{spec.start_pos[0]}"
            print(f"[{n}/{len(sample)}] {kind:10s} {took:5.1f} s {len(tests):3d} tests  {where}  "
                  f"{spec.operator_name}", flush=True)
            if kind == "survived":
                survivors.append((where, spec, diff, len(tests)))
            elif kind == "equivalent":
                equivalents.append((where, spec, diff, 0))
            elif kind == "killed new":
                new_kills.append((where, spec, diff, " ".join(failed(result.output))))
    elapsed = time.monotonic() - start_all

    columns = ("killed", "killed new", "survived", "timeout", "equivalent")
    print(f"\n{'module':40s}" + "".join(f"{c:>11s}" for c in columns))
    total = Counter()
    for module in sorted(counts):
        total.update(counts[module])
        print(f"{module:40s}" + "".join(f"{counts[module][c]:11d}" for c in columns))
    print(f"{'total':40s}" + "".join(f"{total[c]:11d}" for c in columns))
    ran = sum(total[c] for c in columns[:4])
    after = total["killed"] + total["killed new"] + total["timeout"]
    before = total["killed"] + total["timeout"]
    print(f"{elapsed / max(ran + total['equivalent'], 1):.1f} s per mutant, "
          f"{elapsed / 60:.1f} min ({len(sample)} mutants)")
    print(f"killed: {after}/{ran} = {after / max(ran, 1):.1%}; by the tests other than "
          f"the mutant tests ({MUTANT_TESTS}): {before}/{ran} = {before / max(ran, 1):.1%}"
          f" (timeouts count as killed; {total['equivalent']} mutants of annotations, "
          f"never evaluated, left out)")
    if not args.survivors:
        last.write_text(json.dumps({"seed": args.seed, "sample": len(sample),
                                    "sources": sources,
                                    "commit": commit,
                                    "mutants": [mutant_key(s) for _, s, _, _ in survivors]}))
    report = out / "survivors.txt"
    with report.open("w") as f:
        f.write(f"# {len(survivors)} survivors of {ran} mutants (seed {args.seed}, "
                f"budget {args.budget:g} s)\n")
        for where, spec, diff, ntests in survivors:
            f.write(f"\n## {where} {spec.operator_name} #{spec.occurrence} "
                    f"({ntests} tests ran)\n{diff}\n")
        f.write(f"\n# {len(new_kills)} killed only by the mutant tests\n")
        for where, spec, diff, by in new_kills:
            f.write(f"\n## {where} {spec.operator_name} #{spec.occurrence} "
                    f"(killed by {by})\n{diff}\n")
        f.write(f"\n# {len(equivalents)} equivalent: in annotations, never evaluated\n")
        for where, spec, diff, _ in equivalents:
            f.write(f"\n## {where} {spec.operator_name} #{spec.occurrence}\n{diff}\n")
    print(f"survivors: {report}")
    return 0


@contextmanager
def use_mutation_diff(spec):
    """The diff of a mutant that no test runs (applied and undone at once)."""
    import cosmic_ray.plugins
    from cosmic_ray.mutating import _make_diff, use_mutation

    operator = cosmic_ray.plugins.get_operator(spec.operator_name)()
    with use_mutation(spec.module_path, operator, spec.occurrence) as (before, after):
        pass
    yield "\n".join(_make_diff(before, after or before, spec.module_path))


if __name__ == "__main__":
    sys.exit(main())
