#!/usr/bin/env python3
"""The oracle must fail on a wrong expectation: a fixture that raises form ③ but expects
nothing, one that runs clean but expects IP301, and a notebook whose expectation torch agrees
with but the analyzer does not (its cells split the hazard). Usage: test_harness.py BINARY"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RAISES = "import torch\nx = torch.tensor([1.0], requires_grad=True)\ny = torch.exp(x)\ny += 1\ny.sum().backward()\n"
CLEAN = "import torch\nx = torch.tensor([1.0], requires_grad=True)\ny = x * 2\ny += 1  # expect: IP301\ny.sum().backward()\n"
RIGHT = RAISES.replace("y += 1\n", "y += 1  # expect: IP301\n")


def notebook(*cells):
    return json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                  "source": c.splitlines(keepends=True)} for c in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)


NB_HEAD = "%matplotlib inline\nimport torch\nx = torch.tensor([1.0], requires_grad=True)\ny = torch.exp(x)\n"
NB_WRONG = notebook(NB_HEAD, "y += 1  # expect: IP302\n", "y.sum().backward()")
NB_RIGHT = notebook(NB_HEAD, "y += 1  # expect: IP301\n", "y.sum().backward()")


def run(files):
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as fh:
                fh.write(text)
        p = subprocess.run([sys.executable, os.path.join(HERE, "run_fixtures.py"), d, "--binary", sys.argv[1]],
                           capture_output=True, text=True)
        return p.returncode, p.stdout


passed = failed = 0
for label, files, want in [("wrong: missing expectation", {"a.py": RAISES}, 1),
                           ("wrong: expectation on clean code", {"b.py": CLEAN}, 1),
                           ("right expectation", {"c.py": RIGHT}, 0),
                           ("wrong: the analyzer disagrees on a notebook", {"d.ipynb": NB_WRONG}, 1),
                           ("right notebook expectation", {"e.ipynb": NB_RIGHT}, 0)]:
    code, out = run(files)
    ok = code == want and (want == 0 or "DISAGREE" in out)
    passed += ok
    failed += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {label}: exit {code}")
    if not ok:
        print(out)
print(f"harness: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
