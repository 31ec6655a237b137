"""The checks after a decode, one stage: the text read in the model's format, each call
validated (`calls.py`), a contract's repaired (`repair.py`), a JSON answer validated, the
cut-offs, and the audit record (`audit.py`); `checks.py` runs them in that order."""
