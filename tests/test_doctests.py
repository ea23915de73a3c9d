"""Run the docstring examples of every public module as doctests.

The modules are imported as installed (not collected from the source tree), so
the examples are checked against the package under test.
"""

import doctest
import importlib

import pytest

MODULES = [
    "dmlstride.datatypes",
    "dmlstride.sizes",
    "dmlstride.descriptor",
    "dmlstride.transfer",
    "dmlstride.settings",
    "dmlstride.conversion",
    "dmlstride._explain",
    "dmlstride.cli",
    "dmlstride.viewsource",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    globs = dict(vars(module))
    exec("import numpy as np\nfrom dmlstride import *", globs)
    tests = finder.find(module, name, globs=globs)
    examples = sum(len(t.examples) for t in tests)
    for t in tests:
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} doctest example(s) failed in {name}"
    if name in ("dmlstride.datatypes", "dmlstride.sizes", "dmlstride.descriptor", "dmlstride.transfer",
                "dmlstride.conversion"):
        assert examples > 0, f"{name} has no docstring examples"
