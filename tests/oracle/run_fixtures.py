#!/usr/bin/env python3
"""Run every fixture under real torch and compare the runtime outcome with its expectations.

Outcome of a fixture, from what the runtime printed (stdout + stderr, including caught errors):
  form1  "a leaf Variable that requires grad is being used in an in-place operation"
  outarg "functions with out=... arguments don't support automatic differentiation" (an op called
         with `out=` while a tensor requires grad refuses at the call: IP102)
  form2  "a view of a leaf Variable that requires grad is being used in an in-place operation"
  form3  "modified by an inplace operation"
  refusedview  "This view is the output of a function that returns multiple views", "A view
         was created in no_grad mode and is being modified inplace", "This view was created
         inside a custom Function", "more than one element of the written-to tensor refers to
         a single memory location" (an expanded view) or "Inplace update to inference tensor
         outside InferenceMode is not allowed" (IP202)
  silent the fixture printed SILENT-HARM (it computed the right value a second way and differed)
  clean  none of these

Agreement: form1 <=> an IP101 expectation, outarg <=> IP102, form2 <=> IP201, refusedview <=> IP202, form3 <=> an IP30x expectation,
silent => an IP40x expectation; clean => no error-level (IP1xx-IP3xx) expectation. A `# miss:`
comment (real-world fixtures: a hazard the analyzer does not find yet) counts as an expectation here.
Fix verification (with --binary PATH): every fixture with a fix is copied, all its fixes are
applied (`check --fix --unsafe-fixes`), the fixed script runs, and it must agree with the
analyzer's findings on the fixed file by the same rule; errors or silent harm that a fix was
meant to remove must be gone. (A fix that turns a silent `.data` write into a loud form ③ stays
in agreement: the analyzer then reports IP301 on the fixed file.)
Fix coverage and repair rate (with --binary): of the hazard fixtures (those with an `# expect:`),
how many get a fix for every finding, and of those, how many run clean once fixed (no runtime
error, no silent harm, no crash); both must be at least 90%, and no safe fixture may be changed.
Notebooks (`.ipynb`): the code cells run in order as one script (IPython lines and `%%` cells
become `pass`, as the analyzer blanks them), the `# expect:` comments are read from the cells,
and (with --binary) the analyzer's finding codes must equal the expected ones, since the
line-level fixture tests of the Rust suite read only `.py` files.
Projects (`projects/<name>/`, several files): the entry scripts are the `run_*.py` files; the
other files are the project's modules, not fixtures. An entry runs from its folder with the
project folder and its `src/` on PYTHONPATH; its fixes are verified on a copy of the whole project.
Usage: run_fixtures.py FIXTURE_DIR [--binary PATH] [--json OUT]   (exit 1 on any disagreement)
"""
import shutil
import tempfile
import json
import os
import re
import subprocess
import sys
import concurrent.futures as cf
import queue

HERE = os.path.dirname(os.path.abspath(__file__))

FORMS = [
    # prefixes of the verbatim messages (fixtures may print them truncated)
    ("form2", "a view of a leaf Variable that requires grad"),
    ("form1", "a leaf Variable that requires grad"),
    ("outarg", "functions with out=... arguments don't support automatic differentiation"),
    # (`out=` of an op torch fills without a derivative: `backward()` through it raises.)
    ("outarg", "derivative for aten::"),
    ("form3", "needed for gradient computation has been modified"),
    ("refusedview", "This view is the output of a function that returns multiple views"),
    ("refusedview", "A view was created in no_grad mode and is being modified inplace"),
    ("refusedview", "This view was created inside a custom Function"),
    ("refusedview", "more than one element of the written-to tensor refers to a single memory location"),
    ("refusedview", "Inplace update to inference tensor outside InferenceMode is not allowed"),
]


def notebook_script(path):
    """A notebook's code cells as one script, IPython syntax replaced by `pass`."""
    with open(path, encoding="utf-8") as fh:
        cells = json.load(fh)["cells"]
    out = []
    for c in cells:
        if c.get("cell_type") != "code":
            continue
        src = c["source"] if isinstance(c["source"], str) else "".join(c["source"])
        lines = src.split("\n")
        if src.lstrip().startswith("%%"):
            lines = ["pass"]
        for line in lines:
            code = line.lstrip()
            if code.startswith(("%", "!", "?")) or re.match(r"^[\w.]+\s*=\s*[%!]", code):
                line = line[: len(line) - len(code)] + "pass"
            out.append(line)
    return "\n".join(out) + "\n"


def script_text(path):
    if path.endswith(".ipynb"):
        return notebook_script(path)
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def project_of(path):
    """The project folder of an entry script under `projects/<name>/`, else None."""
    parts = os.path.abspath(path).split(os.sep)
    if "projects" in parts[:-2]:
        i = len(parts) - 1 - parts[::-1].index("projects")
        return os.sep.join(parts[: i + 2])
    return None


def is_fixture(path):
    """Every script outside projects; in a project, its `run_*.py` entry scripts."""
    return project_of(path) is None or os.path.basename(path).startswith("run_")


SERVERS = queue.Queue()


def run_script(path, extra_path):
    """`python PATH` from its folder, as a child of a fork server that imported torch once
    (forkserver.py); one server per concurrent caller, reused."""
    try:
        server = SERVERS.get_nowait()
    except queue.Empty:
        env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONHASHSEED="0")
        server = subprocess.Popen([sys.executable, os.path.join(HERE, "forkserver.py")], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=env)
    try:
        server.stdin.write(json.dumps({"script": path, "cwd": os.path.dirname(path), "path": extra_path,
                                       "timeout": 120}) + "\n")
        server.stdin.flush()
        reply = json.loads(server.stdout.readline())
    except (OSError, ValueError):
        server.kill()
        raise
    SERVERS.put(server)
    return reply


def outcome(path):
    path = os.path.abspath(path)
    project = project_of(path)
    extra_path = [project, os.path.join(project, "src")] if project else []
    if path.endswith(".ipynb"):
        work = tempfile.mkdtemp(prefix="inplace-nb-")
        try:
            script = os.path.join(work, "notebook.py")
            with open(script, "w", encoding="utf-8") as fh:
                fh.write(notebook_script(path))
            return outcome(script)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    p = run_script(path, extra_path)
    out = p["stdout"] + p["stderr"]
    found = [name for name, needle in FORMS if needle in out]
    if "form2" in found and "form1" in found:
        # the form-② text contains the form-① text
        if out.count(FORMS[1][1]) == out.count(FORMS[0][1]):
            found.remove("form1")
    if "SILENT-HARM" in out:
        found.append("silent")
    crashed = p["returncode"] != 0 and not found
    return sorted(set(found)), crashed, out[-600:]


def expectations(path, marks=("expect", "miss")):
    """The codes after `# expect:` (and `# miss:`, a hazard the analyzer does not find yet: torch
    must still agree with it; its reason follows ` -- `)."""
    codes = set()
    for line in script_text(path).splitlines():
        m = re.search(r"# (%s):(.*)$" % "|".join(marks), line)
        if m:
            listed = m.group(2).split(" -- ")[0]
            codes.update(c for c in re.split(r"[,\s]+", listed.strip()) if c)
    return codes


def judge(codes, forms):
    problems = []
    has = lambda prefix: any(c.startswith(prefix) for c in codes)
    if ("form1" in forms) != has("IP101"):
        problems.append("form ① vs IP101")
    if ("outarg" in forms) != has("IP102"):
        problems.append("out= refused vs IP102")
    if ("form2" in forms) != has("IP201"):
        problems.append("form ② vs IP201")
    if ("form3" in forms) != has("IP30"):
        problems.append("form ③ vs IP30x")
    if ("refusedview" in forms) != has("IP202"):
        problems.append("refused view write vs IP202")
    if "silent" in forms and not has("IP40"):
        problems.append("silent harm without IP40x")
    return problems


def findings(binary, path):
    out = subprocess.run([binary, "check", "--output-format", "json", "--isolated", path],
                         capture_output=True, text=True)
    return json.loads(out.stdout or "[]")


def verify_fix(binary, path):
    """(fixed?, problems, every finding has a fix?, runs clean once fixed?) for one fixture."""
    before = findings(binary, path)
    if not any(f["fix"] for f in before):
        return False, [], False, False
    work = tempfile.mkdtemp(prefix="inplace-fix-")
    try:
        project = project_of(path)
        if project:
            # The whole project, so that the entry's imports resolve in the copy too.
            copy = os.path.join(work, "projects", os.path.basename(project))
            shutil.copytree(project, copy)
            fixed = os.path.join(copy, os.path.relpath(path, project))
        else:
            fixed = os.path.join(work, os.path.basename(path))
            shutil.copy(path, fixed)
        subprocess.run([binary, "check", "--fix", "--unsafe-fixes", "--isolated", fixed], capture_output=True)
        after = findings(binary, fixed)
        forms, crashed, tail = outcome(fixed)
        codes = {f["code"] for f in after}
        problems = judge(codes, forms)
        if crashed:
            problems.append("fixed script crashed:\n" + tail)
        if "silent" in forms and not any(c.startswith("IP40") for c in codes):
            problems.append("silent harm remains after the fixes")
        fixed_count = sum(1 for f in before if f["fix"]) - sum(1 for f in after if f["fix"])
        if fixed_count <= 0 and len(after) >= len(before):
            problems.append("the fixes changed nothing")
        with open(path, encoding="utf-8") as a, open(fixed, encoding="utf-8") as b:
            changed = a.read() != b.read()
        if changed and not expectations(path):
            problems.append("a safe fixture was changed by the fixes")
        every = all(f["fix"] for f in before)
        clean = changed and not forms and not crashed
        return True, [f"after fix: {p}" for p in problems], every, clean
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv):
    root = argv[0]
    binary = argv[argv.index("--binary") + 1] if "--binary" in argv else None
    files = []
    for d, _, names in os.walk(root):
        files += [os.path.join(d, n) for n in names if n.endswith((".py", ".ipynb"))]
    files = [f for f in files if is_fixture(f)]
    files.sort()
    rows, bad = [], 0
    with cf.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(outcome, files))
    fix_results = [(False, [], False, False)] * len(files)
    if binary:
        with cf.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            fix_results = list(pool.map(lambda f: verify_fix(binary, f), files))
    verified = hazards = covered = repaired = 0
    for f, (forms, crashed, tail), (fixed, fix_problems, every, clean) in zip(files, results, fix_results):
        codes = expectations(f)
        # IP41x is opt-in and marks no hazard (a `.data` habit), and a miss is not found: neither
        # counts for fix coverage.
        hazard = any(not c.startswith("IP41") for c in expectations(f, ("expect",)))
        hazards += hazard
        covered += hazard and every
        repaired += hazard and every and clean
        problems = judge(codes, forms) + fix_problems
        if binary and (f.endswith(".ipynb") or project_of(f)):
            found = {x["code"] for x in findings(binary, f)}
            if found != {c for c in expectations(f, ("expect",)) if not c.startswith("IP41")}:
                problems.append(f"the analyzer found {sorted(found)}")
        if crashed:
            problems.append("script crashed:\n" + tail)
        verified += fixed and not fix_problems
        rel = os.path.relpath(f, root)
        rows.append({"fixture": rel, "runtime": forms or ["clean"], "expected": sorted(codes), "fixed": fixed,
                     "problems": problems})
        bad += bool(problems)
    for r in rows:
        if r["problems"]:
            print(f"DISAGREE {r['fixture']}: runtime {r['runtime']} expected {r['expected']}: {'; '.join(r['problems'])}")
    counts = {}
    for r in rows:
        for form in r["runtime"]:
            counts[form] = counts.get(form, 0) + 1
    print(f"oracle: {len(rows)} fixtures, runtime outcomes {json.dumps(counts, sort_keys=True)}")
    if binary:
        print(f"oracle: fixes verified by running the fixed scripts: {verified} fixtures")
        coverage = covered / max(hazards, 1)
        repair = repaired / max(covered, 1)
        print(f"oracle: fix coverage {covered}/{hazards} hazard fixtures get a fix for every finding "
              f"({coverage:.0%}, target >= 90%); repair rate {repaired}/{covered} run clean once fixed "
              f"({repair:.0%}, target >= 90%)")
        if coverage < 0.9 or repair < 0.9:
            print("oracle: FIX TARGETS MISSED")
            bad += 1
    if bad:
        width = max(len(r["fixture"]) for r in rows)
        print(f"{'fixture':<{width}}  runtime            expected")
        for r in rows:
            if r["problems"]:
                print(f"{r['fixture']:<{width}}  {','.join(r['runtime']):<18} {','.join(r['expected']) or '-'}")
    print(f"{len(rows) - bad} passed, {bad} failed")
    while not SERVERS.empty():
        server = SERVERS.get()
        server.stdin.close()
        server.wait()
    if "--json" in argv:
        with open(argv[argv.index("--json") + 1], "w") as fh:
            json.dump(rows, fh, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
