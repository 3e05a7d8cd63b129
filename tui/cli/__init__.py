"""The ``tether`` command line (click). One module per command group."""
