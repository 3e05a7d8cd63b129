"""The ``tether`` command line: one click module per command group, and a click-free entry
(``entry.py``) for the commands hooks call in loops."""
