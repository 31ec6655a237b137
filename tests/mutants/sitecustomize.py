"""Imported by Python at start where this folder is on PYTHONPATH (tests/mutants/check.py
puts it there): installs the test mutant `STRICTCALL_TEST_MUTANT` names, if any, in this
process (the project's root on its path first: `python -m` adds it only after start)."""

import os
import sys

if os.environ.get("STRICTCALL_TEST_MUTANT"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    from degenerate import install

    install()
