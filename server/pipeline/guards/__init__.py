"""The runaway guards, one stage plugged into the decode: loops of repeated items, strings
that run on, repeats of answered calls (`runaway.py`), read from the growing call text
(`item_loops.py`, `toolstream.py`). They know the decode's options, nothing of the checks
or the answer."""
